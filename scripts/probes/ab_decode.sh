#!/usr/bin/env bash
# Carry [".devab"] holding payload.tar.xz (scripts/build_device.sh of the new side), old-bench.xz and
# old-batched-bench.xz (the old side's minfer-bench / minfer-batched-bench, xz), ncu_summary.py.
# One call, in priority order with a deadline: GPU op tests of the changed kernels, the 7B A/B
# (new vs cf65dc1, interleaved) at depth 0 and 32768, batched-bench, ncu of decode steps.
set -o pipefail
source "$(dirname "$0")/common.sh"
D=.devab
untar $D/payload.tar.xz $D
unxz $D/old-bench.xz /tmp/old/bin/minfer-bench x
unxz $D/old-batched-bench.xz /tmp/old/bin/minfer-batched-bench x
m=/tmp/m/7b.gguf
mkdir -p /tmp/m
[[ -f $m ]] || ($D/bin/minfer-mkmodel -q -o $m --shape qwen2.5-7b > /dev/null 2>&1 &)
gtest t_ops 170 $D/tests/test_backend_ops 'cuda.mul_mat*:cuda.attention*:cuda.get_rows*:Coverage.cuda'
gtest t_cops 100 $D/tests/test_cuda_ops
while pgrep -f minfer-mkmodel > /dev/null; do sleep 2; done; echo "mkmodel done $((SECONDS-t0))s $(ls -la $m | awk '{print $5}')"
for i in 1 2; do
  left 420 || break
  for s in $D /tmp/old; do table $s minfer-bench -m $m --device cuda -p 512 -n 128 -r 3; done
done
echo "bench done $((SECONDS-t0))s"
if left 430; then
  for s in $D /tmp/old; do table $s minfer-bench -m $m --device cuda -p 0 -n 64 -d 4096,32768 -r 2; done
  echo "depth done $((SECONDS-t0))s"
fi
if left 480; then
  for s in $D /tmp/old; do table $s minfer-batched-bench -m $m -npp 512 -ntg 128 -npl 1,4,16; done
  echo "batched done $((SECONDS-t0))s"
fi
if left 520; then
  $D/bin/minfer-mkmodel -q -o /tmp/m/2l.gguf --shape qwen2.5-7b --n-layer 2 > /dev/null 2>&1
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 50 $NCU --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $D/bin/minfer-bench -m /tmp/m/2l.gguf --device cuda --no-cuda-graphs -p 0 -n 3 -v 16 -r 1 > $out/dec.csv 2>$out/dec.err
  echo "ncu rc=$? $((SECONDS-t0))s"
  python3 $D/ncu_summary.py $out/dec.csv 30
fi
