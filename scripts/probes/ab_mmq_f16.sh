#!/usr/bin/env bash
# Carry [".devab"] holding payload.tar.xz (scripts/build_device.sh of the new side), old-bins.tar.xz
# (bin/minfer-bench and bin/minfer-batched-bench of the old side) and ncu_summary.py. One call, in priority order with a
# deadline: the GPU op tests of the matmuls (batch invariance included), then the 7B batched decode A/B
# (new vs old, interleaved, B = 16 / 32 / 64 and 1 / 4 as a no-change check), tg128, then an ncu
# breakdown of a 16-sequence decode step on a 2-layer 7B shape.
set -o pipefail
D=.devab
OUT=${OUT:-/tmp}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
python3 -c "import tarfile; tarfile.open('$D/payload.tar.xz').extractall('$D')"
mkdir -p /tmp/old && python3 -c "import tarfile; tarfile.open('$D/old-bins.tar.xz').extractall('/tmp/old')"
ln -sf /tmp/old/bin/minfer-bench /tmp/old-bench; ln -sf /tmp/old/bin/minfer-batched-bench /tmp/old-batched-bench
t0=$SECONDS
left() { (( SECONDS - t0 < $1 )); }
mkdir -p /tmp/m
[[ -f /tmp/7b.gguf ]] || ($D/bin/minfer-mkmodel -q -o /tmp/7b.gguf --shape qwen2.5-7b > /dev/null 2>&1 &)
if [[ ${TESTS:-0} == 1 ]]; then  # (final_check.sh runs the full suites; TESTS=1 for these alone)
timeout 150 $D/tests/test_backend_ops --gtest_filter='cuda.mul_mat*:Coverage.cuda' > $OUT/t_ops.log 2>&1; echo "ops rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/t_ops.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [a-zA-Z]' $OUT/t_ops.log | head -12
timeout 150 $D/tests/test_cuda_ops > $OUT/t_cops.log 2>&1; echo "cuda_ops rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/t_cops.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [A-Za-z]' $OUT/t_cops.log | head -8
fi
while pgrep -f minfer-mkmodel > /dev/null; do sleep 2; done; echo "mkmodel done $((SECONDS-t0))s"
for i in 1 2; do
  left 420 || break
  $D/bin/minfer-batched-bench -m /tmp/7b.gguf -npp 512 -ntg 128 -npl 16,32,64 2>&1 | grep -E '^\| +512' | sed 's/^/new /'
  /tmp/old-batched-bench -m /tmp/7b.gguf -npp 512 -ntg 128 -npl 16,32,64 2>&1 | grep -E '^\| +512' | sed 's/^/old /'
done
echo "batched done $((SECONDS-t0))s"
if left 440; then
  $D/bin/minfer-batched-bench -m /tmp/7b.gguf -npp 512 -ntg 128 -npl 1,4 2>&1 | grep -E '^\| +512' | sed 's/^/new /'
  /tmp/old-batched-bench -m /tmp/7b.gguf -npp 512 -ntg 128 -npl 1,4 2>&1 | grep -E '^\| +512' | sed 's/^/old /'
fi
if left 470; then
  $D/bin/minfer-bench -m /tmp/7b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E '(pp|tg)[0-9]' | sed 's/^/new /'
  /tmp/old-bench -m /tmp/7b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E '(pp|tg)[0-9]' | sed 's/^/old /'
fi
if left 500; then
  $D/bin/minfer-mkmodel -q -o /tmp/m/2l.gguf --shape qwen2.5-7b --n-layer 2 > /dev/null 2>&1
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 60 $NCU --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $D/bin/minfer-batched-bench -m /tmp/m/2l.gguf --no-cuda-graphs -npp 32 -ntg 3 -npl 16 > $OUT/b16.csv 2>$OUT/b16.err
  echo "ncu rc=$? $((SECONDS-t0))s"
  python3 $D/ncu_summary.py $OUT/b16.csv 30
fi
