#!/usr/bin/env bash
# The GPU suites that cover the attention kernels, within one device call (carry [".dev"] from
# scripts/build_device.sh): every CUDA op case, the model fixtures, the CUDA op tests (the MMQ
# batch-invariance test, unchanged by attention work and 130 s long, is left out).
set -o pipefail
export MINFER_FIXTURES=.dev/fixtures
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
[[ -d .dev/tests ]] || python3 -c "import tarfile; tarfile.open('.dev/payload.tar.xz').extractall('.dev')"
for v in .dev/fixtures/tokenizer/qwen-vocab.gguf; do
  [[ -f $v.xz && ! -f $v ]] && python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1] + '.xz'), open(sys.argv[1], 'wb'))" "$v"
done
t0=$SECONDS
out=${OUT:-/tmp}
summary() { grep -E '^\[  (PASSED|FAILED) ' "$1" | tr '\n' ' '; echo "skipped $(grep -cE '^\[  SKIPPED \] ' "$1")"; grep -E '^\[  FAILED  \] [A-Za-z]' "$1" | head -12; }
timeout 200 .dev/tests/test_backend_ops --gtest_filter='cuda.*:Coverage.cuda' > $out/t_ops.log 2>&1; echo "test_backend_ops rc=$? $((SECONDS-t0))s: $(summary $out/t_ops.log)"
timeout 180 .dev/tests/test_cuda_models > $out/t_models.log 2>&1; echo "test_cuda_models rc=$? $((SECONDS-t0))s: $(summary $out/t_models.log)"
grep -hE '^\[ (cuda|ppl|logits|greedy|spec)' $out/t_models.log | head -30
timeout 150 .dev/tests/test_cuda_ops --gtest_filter='-CudaBatchInvariance.MatmulRowsOfADecodeBatchEqualSingleRows' > $out/t_cuda_ops.log 2>&1; echo "test_cuda_ops rc=$? $((SECONDS-t0))s: $(summary $out/t_cuda_ops.log)"
