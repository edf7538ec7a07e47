#!/usr/bin/env bash
# One device call (carry [".devq"]: payload.tar.xz from scripts/build_device.sh, qwen-vocab.gguf.xz):
# the kernels of one batched decode step, in launch order, with ncu's duration and DRAM bytes, on a
# 2-layer Qwen2.5-7B-shaped Q4_K_M (graphs on: ncu times each graph node), then the 28-layer
# model's S_TG at the same batch for the step time those kernels add up to. NPL (default 16).
set -o pipefail
source "$(dirname "$0")/common.sh"
untar .devq/payload.tar.xz /tmp/new
vocab=/tmp/qwen-vocab.gguf
unxz .devq/qwen-vocab.gguf.xz $vocab
npl=${NPL:-16}
m2=/tmp/7b-2l.gguf
/tmp/new/bin/minfer-mkmodel -q -o $m2 --shape qwen2.5-7b --n-layer 2 --type Q4_K_M --vocab $vocab > $out/mk2.log 2>&1
ncu_csv $out/ncu_step.csv 300 /tmp/new/bin/minfer-batched-bench -m $m2 --device cuda -npp 64 -ntg 4 -npl $npl
echo "ncu rc=$? $((SECONDS - t0)) s"
python3 scripts/ncu_summary.py "$out/ncu_step.csv" --last "${LAST:-70}"
tail -3 $out/ncu_step.csv.err
make_7b /tmp/new/bin/minfer-mkmodel $vocab
table /tmp/new minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl $npl
kernel_profile profile_b16 90 40 /tmp/new/bin/minfer-batched-bench -m $m -npp 128 -ntg 32 -npl $npl
echo "done $((SECONDS - t0)) s"
