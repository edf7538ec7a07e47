#!/usr/bin/env bash
# One device call (carry [".dev", ".devab3"]: .dev from scripts/build_device.sh, .devab3/base-bench.xz
# the base commit's minfer-bench, xz'd): the fused MoE tests, an interleaved A/B of a
# Qwen3-30B-A3B-shaped Q4_K_M cut to N_LAYER blocks (the per-layer cost is the full model's; the
# cut keeps mkmodel short), then a 7B B = 16 decode step by kernel (eager, --cuda-profile;
# PROFILE_7B=0 skips it). CUDA_OPS_FILTER / OPS_FILTER: the tests run first.
set -o pipefail
source "$(dirname "$0")/common.sh"
untar .dev/payload.tar.xz .dev
unxz .devab3/base-bench.xz /tmp/base/bin/minfer-bench x
gtest t_fused 100 .dev/tests/test_cuda_ops "${CUDA_OPS_FILTER:-CudaFused*}"
[[ -z ${OPS_FILTER:-} ]] || gtest t_ops 120 .dev/tests/test_backend_ops "$OPS_FILTER"

a3b=/tmp/a3b.gguf
[[ -f $a3b ]] || .dev/bin/minfer-mkmodel -q -o $a3b --shape qwen3-30b-a3b --n-layer ${N_LAYER:-16} --type Q4_K_M > $out/mk_a3b.log 2>&1 || tail -3 $out/mk_a3b.log
echo "mkmodel a3b $((SECONDS - t0)) s"
for i in 1 2; do
  left 330 || break
  for s in .dev /tmp/base; do table $s minfer-bench -m $a3b --device cuda -p 512 -n 128 -r 3; done
done
echo "A/B $((SECONDS - t0)) s"
kernel_profile profile_a3b 60 40 .dev/bin/minfer-bench -m $a3b -p 0 -n 8 -r 1

if [[ ${PROFILE_7B:-1} == 1 ]] && left 420; then
  m=/tmp/7b.gguf
  [[ -f $m ]] || .dev/bin/minfer-mkmodel -q -o $m --shape qwen2.5-7b --type Q4_K_M > $out/mkmodel.log 2>&1
  echo "mkmodel 7b $((SECONDS - t0)) s"
  kernel_profile profile_b16 90 45 .dev/bin/minfer-batched-bench -m $m -npp 128 -ntg 32 -npl 16
fi
echo "done $((SECONDS - t0)) s"
