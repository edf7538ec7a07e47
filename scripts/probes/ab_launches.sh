#!/usr/bin/env bash
# A decode-step A/B in one call (2026-12-06: the K-split fixup inside the matmul kernels, the norm
# kernels' loads). Carry [".devq"] holding payload.tar.xz (the new build: bin/ minfer-bench,
# minfer-batched-bench, minfer-mkmodel; tests/ test_backend_ops, test_cuda_ops), base-payload.tar.xz
# (the base build's) and qwen-vocab.gguf.xz. Steps: the new build's CUDA op tests (OPS_FILTER,
# CUDA_OPS_FILTER), the kernels of one B = NPL_PROF decode step of each build under ncu (2-layer 7B
# shape; NCU=0 skips), a Qwen3-30B-A3B-shaped Q4_K_M cut to 16 blocks (MOE=1: pp512 / tg128, new
# and base interleaved), then the 7B Q4_K_M benchmarks (DENSE=0 skips; DENSE_SHAPE=qwen2.5-0.5b
# etc. another shape), new and base interleaved, ROUNDS rounds (NPL: batched-bench's batch sizes).
set -o pipefail
source "$(dirname "$0")/common.sh"
unpack_ab
gtest t_ops ${T_OPS:-120} /tmp/new/tests/test_backend_ops "${OPS_FILTER:-cuda.mul_mat*:Coverage.cuda}"
gtest t_cuda_ops ${T_CUDA_OPS:-120} /tmp/new/tests/test_cuda_ops "${CUDA_OPS_FILTER:-CudaFused*}"
if [[ ${MOE:-0} == 1 ]]; then
  a3b=/tmp/a3b.gguf
  /tmp/new/bin/minfer-mkmodel -q -o $a3b --shape qwen3-30b-a3b --n-layer 16 --type Q4_K_M > $out/mk_a3b.log 2>&1
  echo "mkmodel a3b $((SECONDS - t0)) s"
  for i in $(seq ${ROUNDS:-2}); do
    for side in /tmp/new /tmp/base; do table $side minfer-bench -m $a3b --device cuda -p 512 -n 128 -r 3; done
  done
fi
[[ ${DENSE:-1} == 1 ]] || { echo "done $((SECONDS - t0)) s"; exit 0; }
m2=/tmp/7b-2l.gguf
[[ ${NCU:-1} == 1 ]] && /tmp/new/bin/minfer-mkmodel -q -o $m2 --shape qwen2.5-7b --n-layer 2 --type Q4_K_M --vocab $vocab > $out/mk2.log 2>&1
for side in new base; do
  [[ ${NCU:-1} == 1 ]] || break
  echo "== ncu one decode step, $side"
  ncu_csv $out/ncu_$side.csv 120 /tmp/$side/bin/minfer-batched-bench -m $m2 --device cuda -npp 64 -ntg 4 -npl ${NPL_PROF:-16}
  python3 scripts/ncu_summary.py "$out/ncu_$side.csv" --step | sed 's/^/    /'
done
if [[ -n ${DENSE_SHAPE:-} ]]; then  # another dense shape instead of the 7B (quicker to make)
  m=/tmp/dense.gguf
  /tmp/new/bin/minfer-mkmodel -q -o $m --shape $DENSE_SHAPE --type Q4_K_M --vocab $vocab > $out/mk_dense.log 2>&1
  echo "mkmodel $DENSE_SHAPE $((SECONDS - t0)) s"
else
  make_7b /tmp/new/bin/minfer-mkmodel $vocab
fi
for i in $(seq ${ROUNDS:-2}); do
  for side in /tmp/new /tmp/base; do
    left ${T_BENCH:-540} || break
    table $side minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl ${NPL:-1,4,16}
    table $side minfer-bench -m $m --device cuda -p ${PP:-0} -n 64 -r 2
  done
done
echo "done $((SECONDS - t0)) s"
