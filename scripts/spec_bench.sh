#!/usr/bin/env bash
# Speculative decoding on the fixture pair (target qwen3-s Q4_K_M, draft qwen3-xs Q8_0): the 5
# refs.json prompts x greedy / temp 0.8 x adaptive / fixed depth 3, ROUNDS rounds. Every run also
# times plain decoding in the same process (a same-run A/B), so each speedup is paired.
#   scripts/spec_bench.sh BIN_DIR DEVICE OUT_DIR      e.g. build/bin cpu /tmp/spec
# Writes OUT_DIR/spec-runs.jsonl (one minfer-speculative --json object a line, labelled) and
# prints the table of scripts/spec_summary.py.
set -uo pipefail
bin=$1 device=$2 out=$3
fx="${MINFER_FIXTURES:-$(dirname "$0")/../../shared/fixtures}"
rounds="${ROUNDS:-3}"
mkdir -p "$out"
tmp=$(mktemp -d)
python3 -c 'import json,sys
for i, c in enumerate(json.load(open(sys.argv[1]))["cases"]): open(f"{sys.argv[2]}/prompt{i}.txt", "w").write(c["prompt"])' \
  "$fx/qwen3-s/refs.json" "$tmp"
runs="$out/spec-runs.jsonl"
: >"$runs"
failed=0
for rep in $(seq "$rounds"); do
  for mode in adaptive fixed3; do
    flags=()
    [[ $mode == fixed3 ]] && flags=(--no-adaptive --draft-max 3)
    for temp in 0 0.8; do
      for i in 0 1 2 3 4; do
        if j=$(timeout 120 "$bin/minfer-speculative" -m "$fx/qwen3-s/qwen3-s-Q4_K_M.gguf" \
                 -md "$fx/qwen3-xs/qwen3-xs-Q8_0.gguf" --device "$device" --temp "$temp" --seed $((rep * 10 + i)) \
                 -n 256 -f "$tmp/prompt$i.txt" --json "${flags[@]}" 2>>"$out/spec.err"); then
          python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["label"]=dict(zip(["device","mode","temp","prompt","round"], sys.argv[2:])); del j["text"]; print(json.dumps(j))' \
            "$j" "$device" "$mode" "$temp" "$i" "$rep" >>"$runs"
        else
          failed=$((failed + 1))
        fi
      done
    done
  done
done
rm -rf "$tmp"
echo "spec_bench: $(wc -l <"$runs") runs, $failed failed ($device)"
python3 "$(dirname "$0")/spec_summary.py" "$runs"
