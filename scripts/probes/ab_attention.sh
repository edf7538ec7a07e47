#!/usr/bin/env bash
# Attention A/B on the H200, one call. Carry [".devx"] holding new.tar.xz (scripts/build_device.sh's
# payload of the new side) and base.tar.xz (the same script's payload of the base commit).
# Interleaved new/base in each step, with a deadline: decode at depth (f16, then q8_0 at 32768),
# prefill, batched-bench B = 1/4/16.
set -o pipefail
source "$(dirname "$0")/common.sh"
for s in new base; do untar .devx/$s.tar.xz /tmp/$s; done
m=/tmp/m/7b.gguf
mkdir -p /tmp/m
[[ -f $m ]] || /tmp/new/bin/minfer-mkmodel -q -o $m --shape qwen2.5-7b > /dev/null 2>&1
echo "mkmodel $((SECONDS-t0))s"
for i in 1 2; do
  left 300 || break
  for s in /tmp/new /tmp/base; do table $s minfer-bench -m $m --device cuda -p 0 -n 64 -d 0,4096,16384,32768 -r 2; done
done
echo "depth done $((SECONDS-t0))s"
if left 380; then
  for s in /tmp/new /tmp/base; do table $s minfer-bench -m $m --device cuda -p 0 -n 64 -d 32768 --cache-type q8_0 -r 2; done
  echo "q8_0 done $((SECONDS-t0))s"
fi
if left 440; then
  for s in /tmp/new /tmp/base; do table $s minfer-bench -m $m --device cuda -p 512,8192 -n 0 -r 2; done
  echo "prefill done $((SECONDS-t0))s"
fi
if left 500; then
  for s in /tmp/new /tmp/base; do table $s minfer-batched-bench -m $m -npp 512 -ntg 128 -npl 1,4,16; done
  echo "batched done $((SECONDS-t0))s"
fi
