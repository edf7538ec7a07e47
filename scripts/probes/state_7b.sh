#!/usr/bin/env bash
# One device call (carry [".devq"]: payload.tar.xz from scripts/build_device.sh, qwen-vocab.gguf.xz,
# optionally fa_probe.xz): where the open many-sequences and long-context targets stand on this
# card, on a Qwen2.5-7B-shaped Q4_K_M made here — batched decode S_TG at B = 1/4/16/64, prefill
# pp512/pp8192, decode at depth 0 and 32768 (f16 and q8_0 cache), and the prefill attention
# kernel's TFLOP/s (fa_probe, 7B shape). ROUNDS (default 2) repeats the bench rows.
set -o pipefail
source "$(dirname "$0")/common.sh"
untar .devq/payload.tar.xz /tmp/new
vocab=/tmp/qwen-vocab.gguf
unxz .devq/qwen-vocab.gguf.xz $vocab
unxz .devq/fa_probe.xz /tmp/fa_probe x
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
make_7b /tmp/new/bin/minfer-mkmodel $vocab
b=/tmp/new/bin
for r in $(seq 1 "${ROUNDS:-2}"); do
  echo "== round $r $((SECONDS - t0)) s"
  table /tmp/new minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl ${NPL:-1,4,16,64}
  table /tmp/new minfer-bench -m $m --device cuda -p 512,8192 -n 0 -r 2
  table /tmp/new minfer-bench -m $m --device cuda -p 0 -n 64 -d 0,32768 -r 2
  table /tmp/new minfer-bench -m $m --device cuda -p 0 -n 64 -d 32768 -r 2 --cache-type q8_0
done
[[ -x /tmp/fa_probe ]] && timeout 120 /tmp/fa_probe qwen25_7b | grep -E "t8192_d0|t512_d32256|FAIL|ok:"
echo "done $((SECONDS - t0)) s"
