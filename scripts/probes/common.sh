# Sourced by the device-call scripts in scripts/probes/: the CUDA libraries on the loader path,
# $out (the call's $OUT, else /tmp), a clock, and the steps they share.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
out=${OUT:-/tmp}
t0=$SECONDS

# left S: fewer than S seconds have passed since the script started (a step's deadline).
left() { (( SECONDS - t0 < $1 )); }

# untar ARCHIVE DIR: a scripts/build_device.sh payload unpacked into DIR, unless DIR already has it.
untar() {
  [[ -d $2/bin || -d $2/tests ]] && return 0
  mkdir -p "$2" && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$1" "$2"
}

# unxz SRC DST [x]: an xz-packed file (a vocabulary, a base build's binary) unpacked once, made
# executable with "x"; nothing when SRC is absent.
unxz() {
  [[ -f $2 || ! -f $1 ]] && return 0
  mkdir -p "$(dirname "$2")"
  python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$1" "$2"
  [[ ${3:-} == x ]] && chmod +x "$2"
  return 0
}

# gtest NAME LIMIT BINARY [FILTER]: runs a test binary under a time limit into $out/NAME.log and
# prints its exit status, the time so far, the pass/fail lines and the first failures.
gtest() {
  local name=$1 limit=$2 bin=$3 filter=${4:-*}
  timeout "$limit" "$bin" --gtest_filter="$filter" > "$out/$name.log" 2>&1
  echo "$(basename "$bin") rc=$? $((SECONDS - t0)) s: $(grep -E '^\[  (PASSED|FAILED) ' "$out/$name.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] [A-Za-z]|Failure|nmse .* > ' "$out/$name.log" | head -12
}

# unpack_ab: an A/B call's builds from .devq (scripts/build_device.sh payloads: payload.tar.xz the
# new one into /tmp/new, base-payload.tar.xz into /tmp/base) and vocab=/tmp/qwen-vocab.gguf.
unpack_ab() {
  untar .devq/payload.tar.xz /tmp/new
  untar .devq/base-payload.tar.xz /tmp/base
  vocab=/tmp/qwen-vocab.gguf
  unxz .devq/qwen-vocab.gguf.xz $vocab
}

# ncu_csv CSV LIMIT BIN ARGS...: BIN under ncu (clocks left alone, each node of a replayed graph
# timed alone) into CSV with kernel time and DRAM bytes; scripts/ncu_summary.py reads it.
ncu_csv() {
  local csv=$1 limit=$2 ncu; shift 2
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout "$limit" "$ncu" --clock-control none --csv --graph-profiling node \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum "$@" > "$csv" 2> "$csv.err"
}

# table DIR PROGRAM ARGS...: DIR/bin/PROGRAM's benchmark table rows, each prefixed with DIR.
table() { local side=$1; shift; "$side/bin/$@" 2>&1 | grep -E '^\|' | grep -vE '^\| *(model|---)' | sed "s|^|$side |"; }

# kernel_profile NAME LIMIT LINES BIN ARGS...: BIN run eagerly with --cuda-profile into $out/NAME.log
# (a benchmark of one model), then its last table row and the LINES largest kernel-node labels.
kernel_profile() {
  local name=$1 limit=$2 lines=$3 bin=$4; shift 4
  timeout "$limit" "$bin" --device cuda --no-cuda-graphs --cuda-profile "$@" > "$out/$name.log" 2>&1
  grep -E '^\|' "$out/$name.log" | tail -1
  grep -E 'kernel nodes|\[cuda profile\]   ' "$out/$name.log" | grep -v 'graph ' | head -"$lines"
}

# make_7b MKMODEL VOCAB: sets m=/tmp/7b.gguf, the Qwen2.5-7B-shaped Q4_K_M benchmark model (random
# weights, VOCAB's tokenizer so llama.cpp loads it too), made by MKMODEL unless already there.
make_7b() {
  m=/tmp/7b.gguf
  [[ -f $m ]] || "$1" -q -o $m --shape qwen2.5-7b --type Q4_K_M --vocab "$2" > "$out/mkmodel.log" 2>&1
  echo "mkmodel $((SECONDS - t0)) s"
}

# llama_start: llama.cpp (../shared/anchor via .devb) building in the background into /tmp/llama,
# unless a call before this one on the same warm machine started it; lb= its binaries.
llama_start() {
  [[ -d /tmp/llama ]] || bash .devb/anchor/build_llama_cpp.sh cuda /tmp/llama
  lb=/tmp/llama/build/bin
}

# llama_wait S: waits for that build while fewer than S seconds have passed, then says how it went.
llama_wait() {
  while [[ ! -f /tmp/llama/done ]] && left "$1"; do sleep 5; done
  echo "llama.cpp build: $(cat /tmp/llama/done 2>/dev/null || echo unfinished) at $((SECONDS - t0)) s"
}

# llama_bench ARGS...: llama-bench -fa 1 -ngl 99 ARGS, its pp/tg rows (nothing when not built).
llama_bench() { [[ -x $lb/llama-bench ]] && "$lb/llama-bench" -fa 1 -ngl 99 "$@" 2>&1 | grep -E '^\| .*(pp|tg)'; }
