#!/usr/bin/env bash
# One device call (carry [".devq"]: payload.tar.xz = the new build, base-payload.tar.xz = the base,
# qwen-vocab.gguf.xz): the GPU tests of the fused paths on the new build, then new and base in
# turn (ROUNDS, default 2) on a Qwen2.5-7B-shaped and a Llama-3.1-8B-shaped Q4_K_M made here:
# batched decode S_TG at B = 1/4/16 (7B), pp512 + tg128 (both models); NCU=1 adds one B = 1 decode
# step of each shape under ncu (ncu_llama_qwen.sh).
set -o pipefail
source "$(dirname "$0")/common.sh"
unpack_ab
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
mk=/tmp/new/bin/minfer-mkmodel
l8=/tmp/l8.gguf
[[ -f $l8 ]] || $mk -q -o $l8 --shape llama3.1-8b --type Q4_K_M > $out/mk_l8.log 2>&1 &
make_7b $mk $vocab &
gtest t_fused 200 /tmp/new/tests/test_cuda_ops "${CUDA_OPS_FILTER:-CudaFused*:CudaRewrite*:CudaGraph*}"
gtest t_ops 120 /tmp/new/tests/test_backend_ops "${OPS_FILTER:-cuda.mul_mat*:Coverage.cuda}"
wait
m=/tmp/7b.gguf
echo "models $((SECONDS - t0)) s"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for side in /tmp/new /tmp/base; do
    left ${LIMIT:-540} || break 2
    table $side minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl ${NPL:-1,4,16}
    table $side minfer-bench -m $m --device cuda -p 512 -n 128 -r 2
    table $side minfer-bench -m $l8 --device cuda -p 512 -n 128 -r 2
  done
done
[[ -n ${NCU:-} ]] && source "$(dirname "$0")/ncu_llama_qwen.sh"
echo "done $((SECONDS - t0)) s"
