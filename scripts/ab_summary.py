#!/usr/bin/env python3
"""Medians of interleaved benchmark runs, side by side.

  ab_summary.py LABEL=FILE [LABEL=FILE ...]

Each FILE holds the `-o json` outputs of several minfer-bench or llama-bench runs, one JSON array
after the other (the runs of one side of an interleaved A/B). For every test (pp512, tg128 @ d4096,
...) it prints the median over all runs' samples per side, and each side's ratio to the first.
"""
import json
import statistics
import sys


def arrays(text):
    dec = json.JSONDecoder()
    i = 0
    while True:
        j = text.find("[", i)
        if j < 0:
            return
        try:
            obj, i = dec.raw_decode(text, j)
        except json.JSONDecodeError:
            i = j + 1
            continue
        if isinstance(obj, list):
            yield obj


def test_name(row):
    if "test" in row:  # minfer-bench
        name, depth = row["test"], row.get("depth", 0)
    else:  # llama-bench
        p, g, depth = row.get("n_prompt", 0), row.get("n_gen", 0), row.get("n_depth", 0)
        name = f"pp{p}" if p and not g else f"tg{g}" if g and not p else f"pp{p}+tg{g}"
    return f"{name} @ d{depth}" if depth else name


def samples(path):
    out = {}
    with open(path) as f:
        text = f.read()
    for arr in arrays(text):
        for row in arr:
            if isinstance(row, dict) and "samples_ts" in row:
                out.setdefault(test_name(row), []).extend(row["samples_ts"])
    return out


def main():
    sides = []
    for arg in sys.argv[1:]:
        label, _, path = arg.partition("=")
        sides.append((label, samples(path)))
    if not sides:
        sys.exit(__doc__)
    tests = []
    for _, s in sides:
        tests += [t for t in s if t not in tests]
    print("| test | " + " | ".join(f"{l} (median tok/s, n)" for l, _ in sides) + " | " +
          " | ".join(f"{l}/{sides[0][0]}" for l, _ in sides[1:]) + " |")
    print("|---" * (1 + 2 * len(sides) - 1) + "|")
    for t in tests:
        meds = [statistics.median(s[t]) if s.get(t) else None for _, s in sides]
        cells = [f"{m:,.1f} ({len(s[t])})" if m else "-" for m, (_, s) in zip(meds, sides)]
        ratios = [f"{m / meds[0]:.3f}" if m and meds[0] else "-" for m in meds[1:]]
        print(f"| {t} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
