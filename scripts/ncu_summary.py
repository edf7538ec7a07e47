#!/usr/bin/env python3
"""Summarizes `ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum[,dram__bytes_write.sum]`
output (kernel names with arguments and namespaces stripped).
Usage:
  ncu_summary.py ncu.csv [top]         per kernel: launches, total and mean time, DRAM GB/s, share
  ncu_summary.py ncu.csv --last N      the last N launches in order: time, DRAM read, grid and block
  ncu_summary.py ncu.csv --step        the last decode step (from its embedding: the last get_rows
                                       followed by rms_norm_q8_1) per kernel in launch order"""
import csv, io, re, sys
from collections import OrderedDict, defaultdict

text = open(sys.argv[1], errors="replace").read().splitlines()
start = next((i for i, l in enumerate(text) if l.startswith('"ID"')), None)
if start is None:
    sys.exit("ncu_summary: no CSV header in " + sys.argv[1])
rows = list(csv.DictReader(io.StringIO("\n".join(l for l in text[start:] if l.startswith('"')))))
per = defaultdict(dict)  # launch id -> metric -> value
names, shapes = {}, {}
for r in rows:
    i = int(r["ID"])
    per[i][r["Metric Name"]] = (r["Metric Unit"], r["Metric Value"])
    names[i] = r["Kernel Name"]
    shapes[i] = f'{r.get("Grid Size", "")} {r.get("Block Size", "")}'

t_units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3,
           "second": 1.0}
b_units = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9,
           "KiB": 1024.0, "MiB": 1048576.0, "GiB": 1073741824.0}

def val(unit_value, scale):
    unit, v = unit_value
    return float(v.replace(",", "")) * scale.get(unit, 1.0)

def secs(i):
    return val(per[i]["gpu__time_duration.sum"], t_units)

def read_bytes(i):
    return val(per[i]["dram__bytes_read.sum"], b_units) if "dram__bytes_read.sum" in per[i] else 0.0

def short(n):
    n = re.sub(r"\(.*$", "", n)                                   # arguments
    n = n.replace("<unnamed>::", "").replace("void ", "")
    n = re.sub(r"\b(minfer|cuda)::", "", n)
    n = n.replace("(minfer::DType)", "").replace("minfer::DType", "")
    return n[:70]

timed = sorted(i for i in per if "gpu__time_duration.sum" in per[i])
mode = sys.argv[2] if len(sys.argv) > 2 else "25"

if mode == "--last":
    for i in timed[-int(sys.argv[3]):]:
        t, b = secs(i), read_bytes(i)
        print(f"{i:6d} {t * 1e6:8.2f} us {b / 1e6:8.2f} MB {b / t / 1e9 if t else 0:6.0f} GB/s  {short(names[i])}  {shapes[i]}")
elif mode == "--step":
    first = max(i for k, i in enumerate(timed[:-1])
                if "get_rows" in names[i] and "rms_norm_q8_1" in names[timed[k + 1]])
    step = [i for i in timed if i >= first]
    agg = OrderedDict()
    for i in step:
        a = agg.setdefault(short(names[i]), [0, 0.0])
        a[0] += 1
        a[1] += secs(i)
    for n, (c, t) in agg.items():
        print(f"{c:3d} x {t / c * 1e6:7.2f} us = {t * 1e6:8.2f}  {n}")
    print(f"step: {len(step)} kernels, {sum(secs(i) for i in step) * 1e6:.1f} us")
else:
    top = int(mode)
    agg = defaultdict(lambda: [0, 0.0, 0.0])
    for i in timed:
        a = agg[short(names[i])]
        a[0] += 1
        a[1] += secs(i)
        for k in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            if k in per[i]:
                a[2] += val(per[i][k], b_units)
    total = sum(a[1] for a in agg.values())
    print(f"| kernel | launches | total ms | mean us | DRAM GB/s | share |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for k, (n, t, b) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"| {k} | {n} | {t*1e3:.3f} | {t/n*1e6:.1f} | {b/t/1e9 if t else 0:.0f} | {100*t/total:.1f}% |")
    print(f"| total | {sum(a[0] for a in agg.values())} | {total*1e3:.3f} | | | |")
