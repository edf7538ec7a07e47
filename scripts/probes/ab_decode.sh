#!/usr/bin/env bash
# Carry [".devab"] holding payload.tar.xz (scripts/build_device.sh of the new side), old-bench.xz and
# old-batched-bench.xz (the old side's minfer-bench / minfer-batched-bench, xz), ncu_summary.py.
# One call, in priority order with a deadline: GPU op tests of the changed kernels, the 7B A/B
# (new vs cf65dc1, interleaved) at depth 0 and 32768, batched-bench, ncu of decode steps.
set -o pipefail
D=.devab
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
python3 -c "import tarfile; tarfile.open('$D/payload.tar.xz').extractall('$D')"
for b in old-bench old-batched-bench; do python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$D/$b.xz'), open('/tmp/$b','wb'))"; chmod +x /tmp/$b; done
t0=$SECONDS
left() { (( SECONDS - t0 < $1 )); }
mkdir -p /tmp/m
[[ -f /tmp/m/7b.gguf ]] || ($D/bin/minfer-mkmodel -q -o /tmp/m/7b.gguf --shape qwen2.5-7b > /dev/null 2>&1 &)
timeout 170 $D/tests/test_backend_ops --gtest_filter='cuda.mul_mat*:cuda.attention*:cuda.get_rows*:Coverage.cuda' > $OUT/t_ops.log 2>&1; echo "ops rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/t_ops.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [a-zA-Z]' $OUT/t_ops.log | head -12
timeout 100 $D/tests/test_cuda_ops > $OUT/t_cops.log 2>&1; echo "cuda_ops rc=$? $((SECONDS-t0))s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/t_cops.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [A-Za-z]' $OUT/t_cops.log | head -8
while pgrep -f minfer-mkmodel > /dev/null; do sleep 2; done; echo "mkmodel done $((SECONDS-t0))s $(ls -la /tmp/m/7b.gguf | awk '{print $5}')"
for i in 1 2; do
  left 420 || break
  $D/bin/minfer-bench -m /tmp/m/7b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E '(pp|tg)[0-9]' | sed 's/^/new /'
  /tmp/old-bench -m /tmp/m/7b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E '(pp|tg)[0-9]' | sed 's/^/old /'
done
echo "bench done $((SECONDS-t0))s"
if left 430; then
$D/bin/minfer-bench -m /tmp/m/7b.gguf --device cuda -p 0 -n 64 -d 4096,32768 -r 2 2>&1 | grep -E 'tg[0-9]' | sed 's/^/new /'
/tmp/old-bench -m /tmp/m/7b.gguf --device cuda -p 0 -n 64 -d 4096,32768 -r 2 2>&1 | grep -E 'tg[0-9]' | sed 's/^/old /'
echo "depth done $((SECONDS-t0))s"
fi
if left 480; then
$D/bin/minfer-batched-bench -m /tmp/m/7b.gguf -npp 512 -ntg 128 -npl 1,4,16 2>&1 | grep -E '^\|' | sed 's/^/new /'
/tmp/old-batched-bench -m /tmp/m/7b.gguf -npp 512 -ntg 128 -npl 1,4,16 2>&1 | grep -E '^\|' | sed 's/^/old /'
echo "batched done $((SECONDS-t0))s"
fi
if left 520; then
$D/bin/minfer-mkmodel -q -o /tmp/m/2l.gguf --shape qwen2.5-7b --n-layer 2 > /dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 50 $NCU --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum $D/bin/minfer-bench -m /tmp/m/2l.gguf --device cuda --no-cuda-graphs -p 0 -n 3 -v 16 -r 1 > $OUT/dec.csv 2>$OUT/dec.err; echo "ncu rc=$? $((SECONDS-t0))s"
python3 $D/ncu_summary.py $OUT/dec.csv 30
fi
