#!/usr/bin/env python3
"""Summarizes `ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum`
output per kernel (template arguments stripped): launches, total and mean time, DRAM GB/s.
Usage: ncu_summary.py ncu.csv [top]"""
import csv, io, re, sys
from collections import defaultdict

text = open(sys.argv[1], errors="replace").read().splitlines()
top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
start = next((i for i, l in enumerate(text) if l.startswith('"ID"')), None)
if start is None:
    sys.exit("ncu_summary: no CSV header in " + sys.argv[1])
rows = list(csv.DictReader(io.StringIO("\n".join(l for l in text[start:] if l.startswith('"')))))
per = defaultdict(dict)  # launch id -> metric -> value
names = {}
for r in rows:
    per[r["ID"]][r["Metric Name"]] = (r["Metric Unit"], r["Metric Value"])
    names[r["ID"]] = r["Kernel Name"]

def val(unit_value, scale):
    unit, v = unit_value
    v = float(v.replace(",", ""))
    return v * scale.get(unit, 1.0)

def short(n):
    n = re.sub(r"\(.*$", "", n)                                   # arguments
    n = n.replace("<unnamed>::", "").replace("void ", "")
    n = re.sub(r"\b(minfer|cuda)::", "", n)
    n = n.replace("(minfer::DType)", "").replace("minfer::DType", "")
    return n[:70]

agg = defaultdict(lambda: [0, 0.0, 0.0])
t_units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3,
           "second": 1.0}
b_units = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9,
           "KiB": 1024.0, "MiB": 1048576.0, "GiB": 1073741824.0}
for i, m in per.items():
    if "gpu__time_duration.sum" not in m:
        continue
    a = agg[short(names[i])]
    a[0] += 1
    a[1] += val(m["gpu__time_duration.sum"], t_units)
    for k in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
        if k in m:
            a[2] += val(m[k], b_units)
total = sum(a[1] for a in agg.values())
print(f"| kernel | launches | total ms | mean us | DRAM GB/s | share |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for k, (n, t, b) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:top]:
    print(f"| {k} | {n} | {t*1e3:.3f} | {t/n*1e6:.1f} | {b/t/1e9 if t else 0:.0f} | {100*t/total:.1f}% |")
print(f"| total | {sum(a[0] for a in agg.values())} | {total*1e3:.3f} | | | |")
