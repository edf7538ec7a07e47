#!/usr/bin/env bash
# One device call (carry [".dev", ".devb"] from scripts/build_device.sh): minfer beside llama.cpp on
# whatever card the tool lends, same files, same run. llama.cpp is built in the background
# (../shared/anchor, ~6 min on 16 cores) while minfer's side runs: the fixture-free GPU op tests,
# the kernels of one Qwen3-MoE decode step under ncu (2-block Qwen3-30B-A3B shape), then, once
# llama.cpp is there, each engine in turn on a 16-block Qwen3-30B-A3B Q4_K_M (pp512, tg128) and
# the Qwen2.5-7B Q4_K_M batched decode (-npp 512 -ntg 128 -npl 1,4,16).
set -o pipefail
source "$(dirname "$0")/common.sh"
llama_start
untar .dev/payload.tar.xz .dev
vocab=/tmp/qwen-vocab.gguf
unxz .dev/fixtures/tokenizer/qwen-vocab.gguf.xz $vocab
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
mk=.dev/bin/minfer-mkmodel

[[ -z ${OPS_FILTER:-} ]] || gtest t_ops 150 .dev/tests/test_backend_ops "$OPS_FILTER"
[[ -z ${CUDA_OPS_FILTER:-} ]] || gtest t_cuda_ops 150 .dev/tests/test_cuda_ops "$CUDA_OPS_FILTER"

a3b2=/tmp/a3b2.gguf
$mk -q -o $a3b2 --shape qwen3-30b-a3b --n-layer 2 --type Q4_K_M --vocab $vocab > $out/mk_a3b2.log 2>&1
ncu_csv $out/ncu_a3b.csv 120 .dev/bin/minfer-bench -m $a3b2 --device cuda -p 0 -n 3 -r 1
echo "ncu rc=$? $((SECONDS - t0)) s"
python3 scripts/ncu_summary.py $out/ncu_a3b.csv --step
a3b=/tmp/a3b16.gguf
$mk -q -o $a3b --shape qwen3-30b-a3b --n-layer ${N_LAYER:-16} --type Q4_K_M --vocab $vocab > $out/mk_a3b.log 2>&1
echo "mkmodel a3b $((SECONDS - t0)) s"
make_7b $mk $vocab
kernel_profile profile_a3b 60 40 .dev/bin/minfer-bench -m $a3b -p 0 -n 8 -r 1

llama_wait 470
for i in 1 2; do
  table .dev minfer-bench -m $a3b --device cuda -p 512 -n 128 -r 3
  llama_bench -m $a3b -p 512 -n 128 -r 3
done
echo "a3b $((SECONDS - t0)) s"
table .dev minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl 1,4,16
[[ -x $lb/llama-batched-bench ]] && left 560 &&
  $lb/llama-batched-bench -m $m -fa 1 -ngl 99 -c 12288 -npp 512 -ntg 128 -npl 1,4,16 2>&1 | grep -E '^\|' | grep -vE '^\| *(PP|---)'
left 570 && table .dev minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl 16
echo "done $((SECONDS - t0)) s"
