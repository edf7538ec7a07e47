#!/usr/bin/env bash
# The GPU suites on the binaries scripts/build_device.sh staged in .dev (carry [".dev"]), with a
# time limit per binary: the model tests first (fixtures), then every CUDA op case, then the CUDA op
# tests. Environment: OPS_FILTER / CUDA_OPS_FILTER (gtest filters of the last two, default every
# CUDA case / every test), T_MODELS / T_OPS / T_CUDA_OPS (their time limits in seconds).
set -o pipefail
export MINFER_FIXTURES=.dev/fixtures
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
[[ -d .dev/tests ]] || python3 -c "import tarfile; tarfile.open('.dev/payload.tar.xz').extractall('.dev')"
for v in .dev/fixtures/tokenizer/qwen-vocab.gguf; do
  [[ -f $v.xz && ! -f $v ]] && python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1] + '.xz'), open(sys.argv[1], 'wb'))" "$v"
done
t0=$SECONDS
out=${OUT:-/tmp}
timeout ${T_MODELS:-260} .dev/tests/test_cuda_models > $out/t_models.log 2>&1; echo "test_cuda_models rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $out/t_models.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [A-Za-z]' $out/t_models.log | head -8
grep -hE '^\[ (cuda|ppl|logits|greedy|spec)' $out/t_models.log | head -30
timeout ${T_OPS:-200} .dev/tests/test_backend_ops --gtest_filter="${OPS_FILTER:-cuda.*:Coverage.cuda}" > $out/t_ops.log 2>&1; echo "test_backend_ops rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED) ' $out/t_ops.log | tr '\n' ' ') skipped $(grep -cE '^\[  SKIPPED \] cuda' $out/t_ops.log)"
grep -E '^\[  FAILED  \] [a-zA-Z]' $out/t_ops.log | head -12
timeout ${T_CUDA_OPS:-400} .dev/tests/test_cuda_ops --gtest_filter="${CUDA_OPS_FILTER:-*}" > $out/t_cuda_ops.log 2>&1; echo "test_cuda_ops rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED) ' $out/t_cuda_ops.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [a-zA-Z]' $out/t_cuda_ops.log | head -12
