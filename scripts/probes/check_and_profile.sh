#!/usr/bin/env bash
# One device call (carry [".dev", ".devab2"]: .dev from scripts/build_device.sh, .devab2/base.tar.xz
# the same script's payload of the base commit): the GPU tests of the changed kernels, a B = 16
# decode step broken down by kernel (an eager run with --cuda-profile), an interleaved A/B of
# decode at depth against the base, then the server at 16 streams (scripts/probes/server_phases.sh).
# Environment: TESTS_FILTER (test_cuda_ops filter), SKIP_SERVER=1.
set -o pipefail
source "$(dirname "$0")/common.sh"
export MINFER_FIXTURES=.dev/fixtures
untar .dev/payload.tar.xz .dev
untar .devab2/base.tar.xz /tmp/base
vocab=.dev/fixtures/tokenizer/qwen-vocab.gguf
unxz $vocab.xz $vocab
make_7b .dev/bin/minfer-mkmodel $vocab

gtest t_cuda_ops 170 .dev/tests/test_cuda_ops "${TESTS_FILTER:-CudaFused*:CudaBatchInvariance.Attention*:CudaGraph*}"
gtest t_ops 90 .dev/tests/test_backend_ops 'cuda.attention*:Coverage.cuda'

# The B = 16 decode step by kernel (the labels give each node's shape: [d0 x d1 x d2]).
kernel_profile profile_b16 60 45 .dev/bin/minfer-batched-bench -m $m -npp 128 -ntg 32 -npl 16
echo "profile $((SECONDS - t0)) s"

for i in 1 2; do
  left 420 || break
  for s in .dev /tmp/base; do table $s minfer-bench -m $m --device cuda -p 0 -n 64 -d 0,32768 -r 2; done
done
if left 450; then
  for s in .dev /tmp/base; do table $s minfer-bench -m $m --device cuda -p 0 -n 64 -d 32768 --cache-type q8_0 -r 2; done
fi
echo "A/B $((SECONDS - t0)) s"
[[ ${SKIP_SERVER:-0} == 1 ]] || ! left 420 || bash scripts/probes/server_phases.sh 1
echo "done $((SECONDS - t0)) s"
