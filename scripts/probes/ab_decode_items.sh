#!/usr/bin/env bash
# A decode change A/B on the GPU in one call (first for the attention work list, 2026-12-05; then
# the MMVQ rows per warp, 2026-12-06). Carry [".devq"] holding payload.tar.xz
# (scripts/build_device.sh's payload at the new commit), base-payload.tar.xz (at least
# bin/minfer-bench and bin/minfer-batched-bench of the base), qwen-vocab.gguf.xz and, optionally,
# attn_probe_new.xz (scripts/probes/attn_decode_probe.cu built at the new commit). Steps: the probe
# if carried (timings, float64 check, the two combines bit for bit), the CUDA op tests of the new
# build, then the 7B Q4_K_M benchmarks, new and base interleaved (NPL: batched-bench's batch
# sizes; DEPTHS: minfer-bench's; Q8=0 skips the q8_0 KV run). The model tests need the fixtures
# of .dev: scripts/probes/final_check.sh in a call of their own.
set -o pipefail
source "$(dirname "$0")/common.sh"
unpack_ab
unxz .devq/attn_probe_new.xz /tmp/attn_probe_new x
if [[ -x /tmp/attn_probe_new ]]; then
  echo "== probe new"
  timeout ${T_PROBE:-120} /tmp/attn_probe_new 2>&1 | grep -E '^\| (f16|q8_0)' | grep -E 'mma'
  echo "probe $((SECONDS - t0)) s"
fi
gtest t_ops ${T_OPS:-150} /tmp/new/tests/test_backend_ops "${OPS_FILTER:-cuda.attention*:cuda.kv_store*:cuda.mul_mat*:Coverage.cuda}"
gtest t_cuda_ops ${T_CUDA_OPS:-150} /tmp/new/tests/test_cuda_ops "${CUDA_OPS_FILTER:-*}"
make_7b /tmp/new/bin/minfer-mkmodel $vocab
for i in 1 2; do
  for side in /tmp/new /tmp/base; do
    left ${T_BENCH:-540} || break
    table $side minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl ${NPL:-1,4,16}
    table $side minfer-bench -m $m --device cuda -p 0 -n 64 -d ${DEPTHS:-0,32768} -r 2
    [[ ${Q8:-1} == 1 ]] && table $side minfer-bench -m $m --device cuda -p 0 -n 64 -d 32768 -r 2 --cache-type q8_0 | sed 's/^/q8_0 /'
  done
done
echo "done $((SECONDS - t0)) s"
