#!/usr/bin/env python3
"""Summarizes scripts/spec_bench.sh runs (spec-runs.jsonl: minfer-speculative --json objects with a
"label") as a markdown table.

usage: spec_summary.py spec-runs.jsonl...
Per (device, mode, temperature): medians over prompts and rounds of the speculative and plain
decode tok/s and of the speedup (each run measures both, so every speedup is a same-run A/B);
acceptance and tokens per verify pooled over the runs.
"""
import json
import statistics
import sys
from collections import defaultdict

groups = defaultdict(list)
for path in sys.argv[1:]:
    with open(path) as f:
        for line in f:
            if line.strip():
                j = json.loads(line)
                lab = j["label"]
                groups[(lab["device"], lab["mode"], lab["temp"])].append(j)

print("| device | mode | temp | runs | acceptance | tokens/verify | mean depth | spec tok/s | plain tok/s | speedup: median (min-max) | greedy ids identical |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for (dev, mode, temp), runs in sorted(groups.items()):
    s = [r["speculative"] for r in runs]
    drafted, accepted, rounds = (sum(x[k] for x in s) for k in ("drafted", "accepted", "rounds"))
    spec = statistics.median(r["timings"]["decode_tok_s"] for r in runs)
    plain = statistics.median(r["baseline"]["decode_tok_s"] for r in runs)
    sp = [r["speedup"] for r in runs]
    same = [r["baseline"].get("ids_identical") for r in runs]
    ident = f"{sum(1 for v in same if v)}/{len(same)}" if float(temp) == 0 else "n/a"
    print(f"| {dev} | {mode} | {temp} | {len(runs)} | {accepted / max(drafted, 1):.3f} | {(accepted + rounds) / max(rounds, 1):.2f} | "
          f"{drafted / max(rounds, 1):.2f} | {spec:.0f} | {plain:.0f} | {statistics.median(sp):.2f}x ({min(sp):.2f}-{max(sp):.2f}) | {ident} |")
