#!/usr/bin/env bash
# One device call (carry [".dev"] from scripts/build_device.sh): the 7B Q4_K_M shape made with
# the Qwen vocabulary, minfer-batched-bench at B = 16, then minfer-server under 16 streaming
# clients (512-token prompts, 128 tokens out) with the engine's time split by phase
# (/metrics minfer:engine_seconds_total), then the MMQ probe when .dev/mmq_probe is staged.
#   scripts/probes/server_phases.sh [rounds]
set -uo pipefail
source "$(dirname "$0")/common.sh"
untar .dev/payload.tar.xz .dev
vocab=.dev/fixtures/tokenizer/qwen-vocab.gguf
unxz $vocab.xz $vocab
m=/tmp/7b.gguf
[[ -f $m ]] || .dev/bin/minfer-mkmodel -q -o $m --shape qwen2.5-7b --type Q4_K_M --vocab $vocab >$out/mkmodel.log 2>&1 || { tail $out/mkmodel.log; exit 1; }
echo "mkmodel $((SECONDS - t0)) s"
bb() { timeout 200 .dev/bin/minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl ${NPL:-16} 2>&1 | grep -E '^\|' | tee -a $out/batched.log; }
bb
for rounds in ${1:-2}; do
  MINFER_BIN=.dev/bin SERVER_LOG=$out/server.log timeout 200 bash scripts/server_load.sh -m $m --device cuda -np 16 -c 16384 -- \
    -C 16 -R 3 --rounds "$rounds" --prompt-tokens 512 --max-tokens 128 --stream 1 --disconnect 0 --malformed 0 2>&1 | tee $out/load.log | grep -vE '^[0-9]+ \|' | tail -30
done
bb
unxz .dev/mmq_probe.xz .dev/mmq_probe x
if [[ -x .dev/mmq_probe ]]; then timeout 150 .dev/mmq_probe 2>&1 | tee $out/mmq_probe.log; fi
