#!/usr/bin/env bash
# Sourced by a device call after unpack_ab: one decode step (B = 1) of 2-layer Qwen2.5-7B- and
# Llama-3.1-8B-shaped Q4_K_M models under ncu, kernel by kernel with DRAM bytes, new build.
for shape in qwen2.5-7b llama3.1-8b; do
  f=/tmp/$shape-2l.gguf
  [[ -f $f ]] || /tmp/new/bin/minfer-mkmodel -q -o $f --shape $shape --n-layer 2 --type Q4_K_M > $out/mk2_$shape.log 2>&1
  ncu_csv $out/ncu_$shape.csv 120 /tmp/new/bin/minfer-bench -m $f --device cuda -p 0 -n 3 -r 1
  echo "== ncu $shape rc=$? $((SECONDS - t0)) s"
  python3 scripts/ncu_summary.py $out/ncu_$shape.csv --step
done
