#!/usr/bin/env bash
# f16 MMQ row tiles per warp (2026-12-06): the decode matmul probe (scripts/probes/mmq_probe.cu)
# linked against builds of ops/cuda/k_mmq_f16.cu that differ in kRowTiles / kWarps / kStages,
# interleaved per shape, ROUNDS rounds. Carry [".devp"] holding mmq_probe_<variant>.xz:
#   t1w4     1 tile x 4 warps, 2 stages (the kernel before this change: 64 rows a block)
#   t2w4     2 tiles x 4 warps (128 rows a block)
#   t2w2     2 tiles x 2 warps (64 rows a block, 64 threads)
#   t2w2s3   the same with 3 weight stages
#   (also run: nocomp / noload, the pipeline without arithmetic / without weight loads; nt1, the
#   8-column tile at N <= 8 the library took; s3, s4, s3nt1, deeper weight pipelines)
#   f<F>i<I> the K-split targets: mmf16_k_splits' kTargetPerSm = F (4 in the library) and
#            k_splits' blocks-per-SM factor = I (3) (docs/perf/2026-12-06-decode-launches.md)
# Builds: docs/perf/2026-12-06-mmf16-tiles.md. SHAPES: probe shape filters, each optionally
# :kernel (default f16; e.g. q4k_wo:int8). Prints the probe's rows prefixed with the build.
source "$(dirname "$0")/common.sh"
vs=${VARIANTS:-t1w4 t2w4 t2w2 t2w2s3}
for v in $vs; do unxz .devp/mmq_probe_$v.xz /tmp/p_$v x; done
probe() { timeout "${T_SHAPE:-40}" /tmp/p_$1 "$2" "$3" | grep -E '^\| |FAIL' | grep -v -- '---' | sed "s/^/$1 /"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
for r in $(seq ${ROUNDS:-2}); do
  for s in ${SHAPES:-gate_up q4k_down q6k_down lm_head}; do
    k=f16
    [[ $s == *:* ]] && k=${s##*:}
    for v in $vs; do probe $v ${s%%:*} $k | grep -E "\| (${NS:-1|4|8|9|16|32|64}) \||FAIL"; done
  done
  echo "round $r done $((SECONDS - t0)) s"
done
