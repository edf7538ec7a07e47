#!/usr/bin/env bash
# Attention A/B on the H200, one call. Carry [".devx"] holding new.tar.xz (scripts/build_device.sh's
# payload of the new side) and base.tar.xz (the same script's payload of the base commit).
# Interleaved new/base in each step, with a deadline: decode at depth (f16, then q8_0 at 32768),
# prefill, batched-bench B = 1/4/16.
set -o pipefail
X=.devx
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
for s in new base; do mkdir -p /tmp/$s && python3 -c "import tarfile; tarfile.open('$X/$s.tar.xz').extractall('/tmp/$s')"; done
t0=$SECONDS
left() { (( SECONDS - t0 < $1 )); }
mkdir -p /tmp/m
[[ -f /tmp/m/7b.gguf ]] || /tmp/new/bin/minfer-mkmodel -q -o /tmp/m/7b.gguf --shape qwen2.5-7b > /dev/null 2>&1
echo "mkmodel $((SECONDS-t0))s"
run() { local side=$1; shift; "/tmp/$side/bin/$@" 2>&1 | grep -E '^\|' | grep -vE '^\| *(model|---)' | sed "s/^/$side /"; }
for i in 1 2; do
  left 300 || break
  for s in new base; do run $s minfer-bench -m /tmp/m/7b.gguf --device cuda -p 0 -n 64 -d 0,4096,16384,32768 -r 2; done
done
echo "depth done $((SECONDS-t0))s"
if left 380; then
  for s in new base; do run $s minfer-bench -m /tmp/m/7b.gguf --device cuda -p 0 -n 64 -d 32768 --cache-type q8_0 -r 2; done
  echo "q8_0 done $((SECONDS-t0))s"
fi
if left 440; then
  for s in new base; do run $s minfer-bench -m /tmp/m/7b.gguf --device cuda -p 512,8192 -n 0 -r 2; done
  echo "prefill done $((SECONDS-t0))s"
fi
if left 500; then
  for s in new base; do run $s minfer-batched-bench -m /tmp/m/7b.gguf -npp 512 -ntg 128 -npl 1,4,16; done
  echo "batched done $((SECONDS-t0))s"
fi
