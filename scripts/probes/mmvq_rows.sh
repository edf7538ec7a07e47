#!/usr/bin/env bash
# MMVQ rows per warp (2026-12-06): the decode matmul probe (scripts/probes/mmq_probe.cu) linked
# against five builds of ops/cuda/k_mmvq.cu, run on the GPU in one call. Carry [".devq"] holding
# mmq_probe_{base,rpw2,rpw4,rpw2x,rpw4x}.xz:
#   base   k_mmvq.cu before the change (one weight row per warp in the unit layout)
#   rpw2   the change as committed (two rows per warp from two activation rows on, up to 8)
#   rpw4   the same with four rows per warp
#   rpw2x, rpw4x  two / four rows per warp with mmvq() not handing 9..16 rows to the MMQ (what
#          the dp4a kernel would cost there; not a library configuration)
# Builds: docs/perf/2026-12-06-mmvq-rows.md. Prints the probe's rows prefixed with the build.
source "$(dirname "$0")/common.sh"
for v in base rpw2 rpw4 rpw2x rpw4x; do unxz .devq/mmq_probe_$v.xz /tmp/p_$v x; done
probe() { timeout "${T_SHAPE:-20}" /tmp/p_$1 "$2" "$3" | grep -E '^\| ' | grep -v -- '---' | sed "s/^/$1 /"; }
for s in gate_up q4k_down q6k_down; do probe base $s f16 | grep -E '\| (1|2|4|8|9|16) \|'; done
for r in $(seq ${ROUNDS:-1}); do
  for v in rpw2 rpw4 base; do
    for s in gate_up q4k_down q6k_down qkv; do probe $v $s mmvq | grep -E '\| (1|2|4|8) \|'; done
  done
done
for v in base rpw2x rpw4x; do
  for s in qkv wo q4k_down gate_up; do probe $v $s mmvq | grep -E '\| (9|16) \|'; done
done
probe base qkv int8 | grep -E '\| (9|16) \|'
probe base wo int8 | grep -E '\| (9|16) \|'
echo "probe done $((SECONDS - t0)) s"
