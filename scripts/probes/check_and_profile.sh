#!/usr/bin/env bash
# One device call (carry [".dev", ".devab2"]: .dev from scripts/build_device.sh, .devab2/base.tar.xz
# the same script's payload of the base commit): the GPU tests of the changed kernels, a B = 16
# decode step broken down by kernel (an eager run with --cuda-profile), an interleaved A/B of
# decode at depth against the base, then the server at 16 streams (scripts/probes/server_phases.sh).
# Environment: TESTS_FILTER (test_cuda_ops filter), SKIP_SERVER=1.
set -o pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
export MINFER_FIXTURES=.dev/fixtures
out=${OUT:-/tmp}
t0=$SECONDS
left() { (( SECONDS - t0 < $1 )); }
[[ -d .dev/bin ]] || python3 -c "import tarfile; tarfile.open('.dev/payload.tar.xz').extractall('.dev')"
mkdir -p /tmp/base && python3 -c "import tarfile; tarfile.open('.devab2/base.tar.xz').extractall('/tmp/base')"
vocab=.dev/fixtures/tokenizer/qwen-vocab.gguf
[[ -f $vocab.xz && ! -f $vocab ]] && python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1] + '.xz'), open(sys.argv[1], 'wb'))" "$vocab"
m=/tmp/7b.gguf
[[ -f $m ]] || .dev/bin/minfer-mkmodel -q -o $m --shape qwen2.5-7b --type Q4_K_M --vocab $vocab > $out/mkmodel.log 2>&1
echo "mkmodel $((SECONDS - t0)) s"

timeout 170 .dev/tests/test_cuda_ops --gtest_filter="${TESTS_FILTER:-CudaFused*:CudaBatchInvariance.Attention*:CudaGraph*}" > $out/t_cuda_ops.log 2>&1
echo "test_cuda_ops rc=$? $((SECONDS - t0)) s: $(grep -E '^\[  (PASSED|FAILED) ' $out/t_cuda_ops.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [A-Za-z]|Failure|error' $out/t_cuda_ops.log | head -12
timeout 90 .dev/tests/test_backend_ops --gtest_filter='cuda.attention*:Coverage.cuda' > $out/t_ops.log 2>&1
echo "test_backend_ops rc=$? $((SECONDS - t0)) s: $(grep -E '^\[  (PASSED|FAILED) ' $out/t_ops.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [a-zA-Z]' $out/t_ops.log | head -12

# The B = 16 decode step by kernel: nodes of 16 rows are the decode step's ([... x16]).
timeout 60 .dev/bin/minfer-batched-bench -m $m --device cuda --no-cuda-graphs --cuda-profile -npp 128 -ntg 32 -npl 16 \
  > $out/profile_b16.log 2>&1
grep -E '^\|' $out/profile_b16.log | tail -1
grep -E 'kernel nodes|x16\]|x1\] (output|result)' $out/profile_b16.log | head -45
echo "profile $((SECONDS - t0)) s"

run() { local side=$1; shift; "$side/bin/$@" 2>&1 | grep -E '^\|' | grep -vE '^\| *(model|---)' | sed "s|^|$side |"; }
for i in 1 2; do
  left 420 || break
  for s in .dev /tmp/base; do run $s minfer-bench -m $m --device cuda -p 0 -n 64 -d 0,32768 -r 2; done
done
if left 450; then
  for s in .dev /tmp/base; do run $s minfer-bench -m $m --device cuda -p 0 -n 64 -d 32768 --cache-type q8_0 -r 2; done
fi
echo "A/B $((SECONDS - t0)) s"
[[ ${SKIP_SERVER:-0} == 1 ]] || ! left 420 || bash scripts/probes/server_phases.sh 1
echo "done $((SECONDS - t0)) s"
