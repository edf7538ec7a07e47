#!/usr/bin/env python3
"""Summarizes minfer-speculative --json runs (one JSON object per file) as a markdown table.

usage: spec_summary.py FILE...   file names: spec-<device>-t<temp>-p<prompt>-r<rep>.json
Per (device, temperature): median over prompts and repetitions of the speculative and plain
decode tok/s and of the speedup (each run measures both, so every speedup is a same-run A/B),
plus the pooled acceptance rate and mean accepted length.
"""
import json
import re
import statistics
import sys
from collections import defaultdict

groups = defaultdict(list)
for path in sys.argv[1:]:
    m = re.search(r"spec-(\w+)-t([0-9.]+)-p(\d+)-r(\d+)\.json$", path)
    if not m:
        continue
    try:
        with open(path) as f:
            j = json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as e:
        print(f"| {path} | unreadable: {e} |")
        continue
    groups[(m.group(1), m.group(2))].append(j)

print("| device | temp | runs | acceptance | mean accepted | draft depth | spec tok/s | plain tok/s | speedup (median, min-max) | greedy identical |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for (dev, temp), runs in sorted(groups.items()):
    s = [r["speculative"] for r in runs]
    drafted = sum(x["drafted"] for x in s)
    accepted = sum(x["accepted"] for x in s)
    rounds = sum(x["rounds"] for x in s)
    spec = statistics.median(r["timings"]["decode_tok_s"] for r in runs)
    plain = statistics.median(x["baseline"]["decode_tok_s"] for x in s)
    sp = [x["speedup"] for x in s]
    same = [x["baseline"].get("ids_identical") for x in s]
    ident = f"{sum(1 for v in same if v)}/{len(same)}" if float(temp) == 0 else "n/a"
    depth = statistics.mean(x["mean_draft_depth"] for x in s)
    print(f"| {dev} | {temp} | {len(runs)} | {accepted / max(drafted, 1):.3f} | {accepted / max(rounds, 1):.2f} | {depth:.1f} | "
          f"{spec:.0f} | {plain:.0f} | {statistics.median(sp):.2f}x ({min(sp):.2f}-{max(sp):.2f}) | {ident} |")
