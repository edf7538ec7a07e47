#!/usr/bin/env bash
# Decode attention A/B on the H200, one call. Carry [".devq"] holding payload.tar.xz
# (scripts/build_device.sh's payload of the new side), base-bench.xz (the base's minfer-bench),
# qwen-vocab.gguf.xz, attn_probe_base.xz and attn_probe_new.xz (scripts/probes/attn_decode_probe.cu
# built at the base and the new commit). The kernel probe of both sides, the attention op tests,
# then decode at depth 32768 with f16 and q8_0 caches, new and base interleaved, then a B = 16
# batched decode step by kernel node (eager, --cuda-profile).
set -o pipefail
source "$(dirname "$0")/common.sh"
untar .devq/payload.tar.xz /tmp/new
unxz .devq/base-bench.xz /tmp/base/bin/minfer-bench x
for s in base new; do unxz .devq/attn_probe_$s.xz /tmp/attn_probe_$s x; done
vocab=/tmp/qwen-vocab.gguf
unxz .devq/qwen-vocab.gguf.xz $vocab
for s in base new; do
  echo "== probe $s"
  timeout 120 /tmp/attn_probe_$s 2>&1 | grep -E '^\| (f16|q8_0)' | grep -E 'mma \||mma w/o' 
done
echo "probes $((SECONDS - t0)) s"
gtest t_ops ${T_OPS:-150} /tmp/new/tests/test_backend_ops "${OPS_FILTER:-cuda.attention*:cuda.kv_store*:Coverage.cuda}"
gtest t_cuda_ops ${T_CUDA_OPS:-150} /tmp/new/tests/test_cuda_ops '*LongContext*:CudaBatchInvariance.Attention*:CudaGraph*'
make_7b /tmp/new/bin/minfer-mkmodel $vocab
for i in 1 2; do
  left 480 || break
  for ct in f16 q8_0; do table /tmp/new minfer-bench -m $m --device cuda -p 0 -n 64 -d 0,32768 -r 2 --cache-type $ct | sed "s/^/$ct /"; done
  table /tmp/base minfer-bench -m $m --device cuda -p 0 -n 64 -d 32768 -r 2 --cache-type q8_0 | sed "s/^/q8_0 /"
done
if left 520; then
  kernel_profile profile_b16 60 24 /tmp/new/bin/minfer-batched-bench -m $m -npp 128 -ntg 32 -npl 16
fi
echo "done $((SECONDS - t0)) s"
