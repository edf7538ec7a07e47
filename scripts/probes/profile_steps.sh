#!/usr/bin/env bash
# One device call (carry [".dev"] from scripts/build_device.sh): where a decode step's GPU time goes,
# by kernel node (eager runs with --cuda-profile; the labels give each node's op, dtype and shape),
# on the 7B Q4_K_M: a B = 16 batched decode step, then one sequence at depth 32768 with an f16 and
# a q8_0 cache. MOE_FIXTURES=DIR also runs the Qwen3-MoE model tests on the fixtures in DIR.
set -o pipefail
source "$(dirname "$0")/common.sh"
untar .dev/payload.tar.xz .dev
vocab=.dev/fixtures/tokenizer/qwen-vocab.gguf
unxz $vocab.xz $vocab
if [[ -n ${MOE_FIXTURES:-} ]]; then
  MINFER_FIXTURES=$MOE_FIXTURES gtest t_moe 150 .dev/tests/test_cuda_models '*qwen3moe*'
  grep -hE '^\[ (cuda|ppl|logits|greedy)' $out/t_moe.log | head -12
fi
make_7b .dev/bin/minfer-mkmodel $vocab
kernel_profile profile_b16 90 45 .dev/bin/minfer-batched-bench -m $m -npp 128 -ntg 32 -npl 16
for ct in f16 q8_0; do
  echo "== depth 32768, $ct cache"
  kernel_profile profile_d32k_$ct 90 16 .dev/bin/minfer-bench -m $m -p 0 -n 8 -d 32768 -r 1 --cache-type $ct
done
echo "done $((SECONDS - t0)) s"
