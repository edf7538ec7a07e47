#!/usr/bin/env bash
# Programmatic dependent launch (2026-12-05), A/B on the GPU in one binary: the 7B Q4_K_M decode
# with launches programmatic (default) and ordinary (--no-cuda-pdl), interleaved, two rounds.
# Carry [".dev"] (scripts/build_device.sh). The model is made once per machine (make_7b); run
# scripts/probes/final_check.sh for the tests.
set -o pipefail
source "$(dirname "$0")/common.sh"
untar .dev/payload.tar.xz .dev
unxz .dev/fixtures/tokenizer/qwen-vocab.gguf.xz .dev/fixtures/tokenizer/qwen-vocab.gguf
make_7b .dev/bin/minfer-mkmodel .dev/fixtures/tokenizer/qwen-vocab.gguf
for i in 1 2; do
  for flag in "" --no-cuda-pdl; do
    left ${T_BENCH:-480} || break
    label=${flag:-pdl}
    table .dev minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl 1,4,16 $flag | sed "s/^/$label /"
    table .dev minfer-bench -m $m --device cuda -p 512 -n 64 -d 0,32768 -r 2 $flag | sed "s/^/$label /"
  done
done
echo "done $((SECONDS - t0)) s"
