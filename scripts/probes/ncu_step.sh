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
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 300 "$ncu" --clock-control none --csv --graph-profiling node \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
  /tmp/new/bin/minfer-batched-bench -m $m2 --device cuda -npp 64 -ntg 4 -npl $npl > $out/ncu_step.csv 2> $out/ncu_step.err
echo "ncu rc=$? $((SECONDS - t0)) s"
python3 - "$out/ncu_step.csv" "${LAST:-70}" <<'PY'
import csv, io, re, sys
text = open(sys.argv[1], errors="replace").read().splitlines()
start = next(i for i, l in enumerate(text) if l.startswith('"ID"'))
rows = list(csv.DictReader(io.StringIO("\n".join(l for l in text[start:] if l.startswith('"')))))
per, names, grid = {}, {}, {}
for r in rows:
    per.setdefault(int(r["ID"]), {})[r["Metric Name"]] = (r["Metric Unit"], float(r["Metric Value"].replace(",", "")))
    names[int(r["ID"])] = r["Kernel Name"]; grid[int(r["ID"])] = r.get("Grid Size", "") + " " + r.get("Block Size", "")
scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "nsecond": 1e-3, "msecond": 1e3, "ms": 1e3}
bsc = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
ids = sorted(per)[-int(sys.argv[2]):]
for i in ids:
    u, t = per[i]["gpu__time_duration.sum"]; t *= scale.get(u, 1)
    rb = per[i].get("dram__bytes_read.sum", ("byte", 0)); rb = rb[1] * bsc.get(rb[0], 1)
    n = re.sub(r"\(.*$", "", names[i]).replace("void ", "").replace("minfer::cuda::", "").replace("<unnamed>::", "")[:60]
    print(f"{i:6d} {t:8.2f} us {rb/1e6:8.2f} MB {rb/max(t,1e-9)/1e3:6.0f} GB/s  {n}  {grid[i]}")
PY
tail -3 $out/ncu_step.err
make_7b /tmp/new/bin/minfer-mkmodel $vocab
table /tmp/new minfer-batched-bench -m $m --device cuda -npp 512 -ntg 128 -npl $npl
kernel_profile profile_b16 90 40 /tmp/new/bin/minfer-batched-bench -m $m -npp 128 -ntg 32 -npl $npl
echo "done $((SECONDS - t0)) s"
