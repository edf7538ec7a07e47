#!/usr/bin/env bash
# Runs ON the GPU machine, from the repo root, over what scripts/build_device.sh staged in .dev/:
#   scripts/gpu_check.sh [tests] [bench] [bench7b] [server] [env]     (default: tests bench)
#   tests    the GPU test binaries (.dev/tests/test_cuda_*) with MINFER_FIXTURES=.dev/fixtures
#   bench    minfer-mkmodel + minfer-bench on a small model (qwen2.5-0.5b shape, Q4_K_M)
#   bench7b  the same on the qwen2.5-7b shape (Q4_K_M): pp512 and tg128
#   profile  ncu per-kernel times/bandwidth of pp512 + 4 decode steps on a 2-layer 7B shape
#   table    the BRIEF's llama.cpp table on the device: qwen2.5-7b (pp512, pp2048, tg128, tg128 at
#            depth 4096), qwen3-8b (pp512, pp2048, tg128), qwen2.5-0.5b Q4_K_M and Q8_0
#   attn     decode at depths 0/1024/4096 on the 7B shape, GQA decode kernel on vs off, interleaved
#   generate the default model greedy on CPU and CUDA (same text?), and an impossible -c on CUDA
#   spec     speculative decoding on the fixture pair (scripts/spec_bench.sh: each run also times
#            plain decoding, a same-run A/B)
#   verify   the verify-batch cost curve (minfer-bench -v 2,4,8,16,17) on the 7B and 0.5B shapes
#   batched  minfer-batched-bench on the 7B shape (-npp 512 -ntg 128 -npl 1,4,16,64), then S_TG at
#            B = 16 for KV block sizes 16/32/64/128
#   long     long contexts on the 7B shape (issue 13): pp512/pp8192/pp32768, tg64 at depths
#            0/4096/16384/32768 (f16 cache) and 32768 (q8_0 cache); llama-bench the same with LLAMA
#   decprof  ncu times of decode-shaped steps alone (2-layer 7B shape): 4 single-row decode steps
#            (MMVQ) and one verify batch of 16 rows (MMQ), graphs off
#   attnprof ncu times of the attention kernels alone (2-layer 7B shape): a pp8192 prefill (the
#            tensor-core kernel; TFLOP/s = 4 * sum_t(t) * d * heads / time) and decode steps at
#            depths 4096 and 32768 (split-KV kernel; GB/s of K/V read)
#   server   minfer-server under load on the 7B shape: 16 streaming clients, 512-token prompts, 128
#            tokens out (scripts/server_load.sh, 2 rounds: the first warms the graphs), next to
#            minfer-batched-bench -npp 512 -ntg 128 -npl 16 in the same run (issue 12's target:
#            aggregate >= 80 % of it)
#   BLOCK_SIZES="16 32" in the environment: the block sizes the batched step sweeps (default 16 32 64 128;
#   empty: none)
#   LLAMA=DIR in the environment: the same batched/table runs with llama.cpp's binaries in DIR/build/bin
#   AB=1 in the environment adds bench runs with --no-cuda-graphs and --no-fusion;
#   PROF=1 adds one with --cuda-profile (host vs GPU time per graph).
#   ab       this build against an older one on the 7B shape, interleaved (OLD_BENCH=its minfer-bench,
#            or .dev/old-bench.xz): pp512 and tg128 medians, the refactor no-regression check
#   arch     Llama-3.1-8B and Qwen3-30B-A3B shapes beside Qwen2.5-7B, each interleaved with llama.cpp
#            when LLAMA is set (llama.cpp: `bash .devb/anchor/build_llama_cpp.sh cuda /tmp/llama`
#            first, then LLAMA=/tmp/llama; the Llama vocabulary comes from .devb)
#   env      nvidia-smi and library checks only
# Logs go to $OUT (or /tmp/gpu_check): one file per step plus summary.txt; the summary table is
# printed last.
set -uo pipefail
out="${OUT:-/tmp/gpu_check}"
mkdir -p "$out"
export MINFER_FIXTURES="${MINFER_FIXTURES:-.dev/fixtures}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NCCL (multi-GPU tensor parallelism) is not linked: the first multi-GPU group of a process
# loads libnccl.so.2 with dlopen, through the loader's search path, and single-GPU runs never
# need it. Where the loader cannot see one, the first found of the toolkit's lib directories and
# PyTorch's wheel (nvidia-nccl-cu13) goes on LD_LIBRARY_PATH; step_env reports which.
nccl_dir() {
  local d
  for d in ${LD_LIBRARY_PATH//:/ }; do [[ -e $d/libnccl.so.2 ]] && { echo "$d"; return; }; done
  ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 ' && { ldconfig -p | grep -m1 'libnccl\.so\.2 ' | sed 's/.*=> //'; return; }
  for d in /usr/local/cuda/lib /usr/local/cuda/lib64 \
    "$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)"; do
    [[ -n $d && -e $d/libnccl.so.2 ]] && { echo "$d"; return; }
  done
}
nccl_found=$(nccl_dir)
[[ -z $nccl_found || -f $nccl_found || :$LD_LIBRARY_PATH: == *":$nccl_found:"* ]] || export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_found"
# NVLink multicast stays off (the machines' rule; minfer forces it too).
export NCCL_NVLS_ENABLE=0
if [[ -f .dev/payload.tar.xz && ! -d .dev/tests ]]; then  # staged by scripts/build_device.sh
  python3 -c "import tarfile; tarfile.open('.dev/payload.tar.xz').extractall('.dev')" || tar -C .dev -xJf .dev/payload.tar.xz
fi
for v in .devb/llama3-vocab.gguf "$MINFER_FIXTURES/tokenizer/qwen-vocab.gguf"; do  # staged xz-packed
  if [[ -f $v.xz && ! -f $v ]]; then
    python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1] + '.xz'), open(sys.argv[1], 'wb'))" "$v"
  fi
done
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(tests bench)
summary="$out/summary.txt"
: >"$summary"
row() { printf '| %-34s | %-10s | %s |\n' "$1" "$2" "$3" | tee -a "$summary" >/dev/null; }
models=/tmp/minfer-models
mkdir -p "$models"

step_env() {
  nvidia-smi -L 2>&1 | head -2
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1 | tail -1
  for f in .dev/tests/* .dev/bin/*; do
    if ldd "$f" | grep -q "not found"; then
      row "ldd $(basename "$f")" "MISSING" "$(ldd "$f" | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')"
    fi
  done
  if [[ -n $nccl_found ]]; then row "libnccl.so.2 (dlopen)" "found" "$nccl_found"
  else row "libnccl.so.2 (dlopen)" "absent" "multi-GPU groups are refused (their tests skip); one GPU is unaffected"; fi
}

# A gtest binary: full log to $OUT, pass/fail/skip counts to the summary.
step_gtest() {
  local name=$1 limit=$2
  shift 2
  local log="$out/$name.log"
  local t0=$SECONDS
  timeout "$limit" ".dev/tests/$name" --gtest_color=no "$@" >"$log" 2>&1
  local rc=$?
  local passed failed skipped
  passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  failed=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  skipped=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  row "$name" "rc $rc" "${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped, $((SECONDS - t0)) s"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sed 's/ ([0-9]* ms)$//' | sort -u | head -20 | sed 's/^/    /' | tee -a "$summary"
  [[ $rc == 0 || -n ${failed:-} ]] || tail -5 "$log" | sed 's/^/    /' | tee -a "$summary"
}

step_tests() {
  step_gtest test_backend_ops 600 --gtest_filter='cuda.*:Coverage.cuda'
  step_gtest test_cuda_ops 300
  step_gtest test_cuda_models 300
  step_gtest test_cuda_parallel 300
  grep -hE '^\[ (cuda|oom|coverage)' "$out"/test_backend_ops.log "$out"/test_cuda_*.log | sed 's/^/    /' | head -40
}

# bench <label> <mkmodel args...>: make the model (timed), then pp512/tg128.
bench_model() {
  local label=$1
  shift
  local gguf="$models/$label.gguf"
  local t0=$SECONDS
  if [[ ! -f $gguf ]]; then
    .dev/bin/minfer-mkmodel -q -o "$gguf" "$@" >"$out/mkmodel-$label.log" 2>&1 || { row "mkmodel $label" FAIL "$(tail -1 "$out/mkmodel-$label.log")"; return; }
  fi
  row "mkmodel $label" ok "$((SECONDS - t0)) s, $(du -h "$gguf" | cut -f1)"
  local variants=("default")
  [[ -n ${AB:-} ]] && variants+=(--no-cuda-graphs --no-fusion)
  [[ -n ${PROF:-} ]] && variants+=(--cuda-profile)
  for v in "${variants[@]}"; do
    t0=$SECONDS
    local flags=()
    [[ $v == default ]] || flags=("$v")
    timeout 300 .dev/bin/minfer-bench -m "$gguf" --device cuda -p 512 -n 128 -r "${REPS:-3}" "${flags[@]}" \
      >>"$out/bench-$label.log" 2>&1
    local rc=$?
    row "bench $label ($v)" "rc $rc" "$((SECONDS - t0)) s"
    grep -E '^\| .*(pp|tg)[0-9]' "$out/bench-$label.log" | tail -2 | sed 's/^/    /' | tee -a "$summary" >/dev/null
    [[ $rc == 0 ]] || tail -5 "$out/bench-$label.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
    [[ $v == --cuda-profile ]] && grep '^\[cuda profile\]' "$out/bench-$label.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
  done
}

# bench_args <label> <bench args...>: one minfer-bench run on an already made model.
bench_args() {
  local label=$1
  shift
  local gguf="$models/$label.gguf" t0=$SECONDS
  timeout 400 .dev/bin/minfer-bench -m "$gguf" --device cuda -r "${REPS:-3}" "$@" >>"$out/table-$label.log" 2>&1
  local rc=$?
  row "bench $label $*" "rc $rc" "$((SECONDS - t0)) s"
  grep -E '^\| .*(pp|tg)[0-9]' "$out/table-$label.log" | tail -4 | sed 's/^/    /' | tee -a "$summary" >/dev/null
}

# make_model <label> <mkmodel args...>: a model llama.cpp can load too (a real tokenizer: VOCAB, default
# the Qwen vocabulary).
make_model() {
  local label=$1
  shift
  local gguf="$models/$label.gguf" t0=$SECONDS
  [[ -f $gguf ]] || .dev/bin/minfer-mkmodel -q -o "$gguf" --vocab "${VOCAB:-$MINFER_FIXTURES/tokenizer/qwen-vocab.gguf}" "$@" \
    >"$out/mkmodel-$label.log" 2>&1 ||
    { row "mkmodel $label" FAIL "$(tail -1 "$out/mkmodel-$label.log")"; return 1; }
  row "mkmodel $label" ok "$((SECONDS - t0)) s, $(du -h "$gguf" | cut -f1)"
}

step_table() {
  make_model qwen2.5-7b-q4km --shape qwen2.5-7b && {
    bench_args qwen2.5-7b-q4km -p 512,2048 -n 128
    bench_args qwen2.5-7b-q4km -p 0 -n 128 -d 4096
  }
  make_model qwen3-8b-q4km --shape qwen3-8b && bench_args qwen3-8b-q4km -p 512,2048 -n 128
  make_model qwen2.5-0.5b-q4km --shape qwen2.5-0.5b && bench_args qwen2.5-0.5b-q4km -p 512 -n 128
  make_model qwen2.5-0.5b-q8_0 --shape qwen2.5-0.5b --type Q8_0 && bench_args qwen2.5-0.5b-q8_0 -p 512 -n 128
}

step_attn() {
  make_model qwen2.5-7b-q4km --shape qwen2.5-7b || return
  local gguf="$models/qwen2.5-7b-q4km.gguf"
  timeout 300 .dev/bin/minfer-bench -m "$gguf" --device cuda -p 0 -n 128 -d 0,1024,4096 -r 3 >"$out/attn.log" 2>&1
  row "decode at depth" "rc $?" ""
  grep -E '^\| .*tg[0-9]' "$out/attn.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
}

# Many sequences decoded together (minfer-batched-bench), and the KV block size.
step_batched() {
  make_model qwen2.5-7b-q4km --shape qwen2.5-7b || return
  local gguf="$models/qwen2.5-7b-q4km.gguf" t0=$SECONDS bs
  timeout 400 .dev/bin/minfer-batched-bench -m "$gguf" --device cuda -npp 512 -ntg 128 -npl 1,4,16,64 \
    >"$out/batched.log" 2>&1
  row "batched-bench 7B" "rc $?" "$((SECONDS - t0)) s"
  grep -E '^\|' "$out/batched.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
  for bs in ${BLOCK_SIZES-16 32 64 128}; do
    timeout 200 .dev/bin/minfer-batched-bench -m "$gguf" --device cuda -npp 512 -ntg 32 -npl 16 --block-size "$bs" \
      >"$out/batched-bs$bs.log" 2>&1
    row "batched-bench 7B block size $bs" "rc $?" "$(grep -E '^\| +512' "$out/batched-bs$bs.log" | tr -s ' ')"
  done
  if [[ -n ${LLAMA:-} ]]; then
    timeout 400 "$LLAMA/build/bin/llama-batched-bench" -m "$gguf" -fa 1 -ngl 99 -c 45056 -b 2048 -ub 512 -npp 512 \
      -ntg 128 -npl 1,4,16,64 >"$out/llama-batched.log" 2>&1
    row "llama-batched-bench 7B" "rc $?" ""
    grep -E '^\|' "$out/llama-batched.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
  fi
}

# Long contexts: prefill up to 32k tokens in one pass, decode at depth, f16 and q8_0 KV.
step_long() {
  make_model qwen2.5-7b-q4km --shape qwen2.5-7b || return
  bench_args qwen2.5-7b-q4km -p 512,8192 -n 0
  REPS=1 bench_args qwen2.5-7b-q4km -p 32768 -n 0
  bench_args qwen2.5-7b-q4km -p 0 -n 64 -d 0,4096,16384,32768
  bench_args qwen2.5-7b-q4km -p 0 -n 64 -d 32768 --cache-type q8_0
  if [[ -n ${LLAMA:-} ]]; then
    local gguf="$models/qwen2.5-7b-q4km.gguf" t0=$SECONDS
    for a in "-p 512,8192 -n 0 -r 3" "-p 32768 -n 0 -r 1" "-p 0 -n 64 -d 0,4096,16384,32768 -r 3" \
             "-p 0 -n 64 -d 32768 -r 3 -ctk q8_0 -ctv q8_0"; do
      # shellcheck disable=SC2086
      timeout 400 "$LLAMA/build/bin/llama-bench" -m "$gguf" -fa 1 -ngl 99 $a >>"$out/llama-long.log" 2>&1
      row "llama-bench 7B $a" "rc $?" "$((SECONDS - t0)) s"
    done
    grep -E '^\| .*(pp|tg)[0-9]' "$out/llama-long.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
  fi
}

# The server under load (docs/server.md), and the batched-bench figure it is compared with.
step_server() {
  make_model qwen2.5-7b-q4km --shape qwen2.5-7b || return
  local gguf="$models/qwen2.5-7b-q4km.gguf" t0=$SECONDS
  timeout 300 .dev/bin/minfer-batched-bench -m "$gguf" --device cuda -npp 512 -ntg 128 -npl 16 >"$out/server-batched.log" 2>&1
  row "batched-bench 7B B=16" "rc $?" "$(grep -E '^\| +512' "$out/server-batched.log" | tr -s ' ')"
  t0=$SECONDS
  MINFER_BIN=.dev/bin SERVER_LOG="$out/server.log" timeout 240 bash scripts/server_load.sh -m "$gguf" --device cuda \
    -np 16 -c 16384 -- -C 16 -R "${SERVER_REQUESTS:-6}" --rounds 2 --prompt-tokens 512 --max-tokens 128 --stream 1 \
    --disconnect 0 --malformed 0 >"$out/server-load.log" 2>&1
  row "server load 7B 16 streams" "rc $?" "$((SECONDS - t0)) s"
  grep -E '^(round|[0-9]+) \|' "$out/server-load.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
  # The same with 10 % disconnects and 5 % malformed requests: nothing may leak.
  MINFER_BIN=.dev/bin SERVER_LOG="$out/server-mixed.log" timeout 240 bash scripts/server_load.sh -m "$gguf" --device cuda \
    -np 16 -c 32768 -- -C 32 -R 8 --rounds 2 --prompt-max 1024 --out-max 128 >"$out/server-load-mixed.log" 2>&1
  row "server load 7B mixed (32 clients)" "rc $?" "$(grep -E '^(PASS|FAIL)' "$out/server-load-mixed.log")"
  grep -E '^(round|[0-9]+) \|' "$out/server-load-mixed.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
}

step_generate() {
  local cpu cuda
  cpu=$(.dev/bin/minfer-generate --device cpu --temp 0 -n 64 --json 2>"$out/gen-cpu.err")
  cuda=$(.dev/bin/minfer-generate --device cuda --temp 0 -n 64 --json 2>"$out/gen-cuda.err")
  echo "$cpu" >"$out/gen-cpu.json"
  echo "$cuda" >"$out/gen-cuda.json"
  local ids_cpu ids_cuda
  ids_cpu=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ids"])' "$cpu" 2>/dev/null)
  ids_cuda=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ids"])' "$cuda" 2>/dev/null)
  if [[ -n $ids_cpu && $ids_cpu == "$ids_cuda" ]]; then row "generate greedy cpu vs cuda" same "64 ids identical"
  else row "generate greedy cpu vs cuda" DIFFER "cpu $ids_cpu / cuda $ids_cuda"; fi
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print("    cuda default model: prefill %.0f tok/s, decode %.0f tok/s" % (j["timings"]["prefill_tok_s"], j["timings"]["decode_tok_s"]))' "$cuda" | tee -a "$summary" >/dev/null
  local oom rc
  oom=$(.dev/bin/minfer-generate --device cuda -c 2000000000 2>&1)
  rc=$?
  row "generate -c 2e9 on cuda" "rc $rc" "$(echo "$oom" | grep -m1 error: | cut -c1-150)"
}

# The attention kernels alone under ncu: prefill of 8192 tokens, decode at depth.
step_attnprof() {
  local gguf="$models/qwen2.5-7b-2layers.gguf" t0=$SECONDS ncu a
  [[ -f $gguf ]] || .dev/bin/minfer-mkmodel -q -o "$gguf" --shape qwen2.5-7b --n-layer 2 >"$out/mkmodel-2l.log" 2>&1
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [[ -n $ncu ]] || { row attnprof FAIL "no ncu"; return; }
  for a in "-p 8192 -n 0" "-p 0 -n 4 -d 4096" "-p 0 -n 4 -d 32768"; do
    # shellcheck disable=SC2086
    timeout 240 "$ncu" --clock-control none --csv --kernel-name regex:attn_ \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      .dev/bin/minfer-bench -m "$gguf" --device cuda --no-cuda-graphs $a -r 1 >"$out/ncu-attn.csv" 2>"$out/ncu-attn.err"
    row "ncu attention $a" "rc $?" "$((SECONDS - t0)) s"
    python3 scripts/ncu_summary.py "$out/ncu-attn.csv" 10 2>&1 | sed 's/^/    /' | tee -a "$summary" >/dev/null
  done
}

# Per-kernel times and DRAM bandwidth of one pp512 + a few decode steps (ncu, 2-layer 7B shape).
# ncu_bench <label> <csv> <minfer-bench args...>: per-kernel time and DRAM traffic of a minfer-bench
# run on the 2-layer 7B shape (graphs off, so every launch is profiled), summarized per kernel.
ncu_bench() {
  local label=$1 csv=$2 gguf="$models/qwen2.5-7b-2layers.gguf" t0=$SECONDS ncu
  shift 2
  [[ -f $gguf ]] || .dev/bin/minfer-mkmodel -q -o "$gguf" --shape qwen2.5-7b --n-layer 2 >"$out/mkmodel-2l.log" 2>&1
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [[ -n $ncu ]] || { row "$label" FAIL "no ncu"; return; }
  timeout 240 "$ncu" --clock-control none --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    .dev/bin/minfer-bench -m "$gguf" --device cuda --no-cuda-graphs "$@" >"$out/$csv" 2>"$out/$csv.err"
  local rc=$?
  row "$label" "rc $rc" "$((SECONDS - t0)) s"
  python3 scripts/ncu_summary.py "$out/$csv" 30 2>&1 | sed 's/^/    /' | tee -a "$summary" >/dev/null
  [[ $rc == 0 ]] || tail -3 "$out/$csv.err" | sed 's/^/    /' | tee -a "$summary" >/dev/null
}
step_profile() { ncu_bench "ncu profile (2-layer 7B shape)" ncu.csv -p 512 -n 4 -r 1; }
step_decprof() { ncu_bench "ncu decode/verify16 (2-layer 7B)" ncu-dec.csv -p 0 -n 4 -v 16 -r 1; }

# Speculative decoding on the fixture pair, then what a verify batch of N tokens costs.
step_spec() {
  local t0=$SECONDS
  bash scripts/spec_bench.sh .dev/bin cuda "$out" >"$out/spec.md" 2>&1
  row "speculative fixture pair (cuda)" "rc $?" "$((SECONDS - t0)) s, $(head -1 "$out/spec.md")"
  tail -n +2 "$out/spec.md" | sed 's/^/    /' | tee -a "$summary" >/dev/null
}

# What a verify batch of N tokens costs next to a decode step (minfer-bench -v).
step_verify() {
  make_model qwen2.5-7b-q4km --shape qwen2.5-7b && bench_args qwen2.5-7b-q4km -p 0 -n 32 -v 2,4,8,16,17 -d 0,1024
  grep -E '^\| .*(tg|vb)[0-9]' "$out/table-qwen2.5-7b-q4km.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
  make_model qwen2.5-0.5b-q4km --shape qwen2.5-0.5b && bench_args qwen2.5-0.5b-q4km -p 0 -n 32 -v 2,4,8,16,17 -d 0
  grep -E '^\| .*(tg|vb)[0-9]' "$out/table-qwen2.5-0.5b-q4km.log" | sed 's/^/    /' | tee -a "$summary" >/dev/null
}

# interleaved <name> <gguf> <bench args...>: ROUNDS (default 3) rounds of minfer-bench, then the other
# sides of the comparison, in turn: OLD_BENCH (another minfer build's minfer-bench) with the same
# arguments, and llama-bench (LLAMA set) with LLAMA_ARGS; medians per side (scripts/ab_summary.py).
interleaved() {
  local name=$1 gguf=$2 t0=$SECONDS i
  shift 2
  local sides=("new=$out/$name-new.json")
  for ((i = 0; i < ${ROUNDS:-3}; ++i)); do
    timeout 300 .dev/bin/minfer-bench -m "$gguf" --device cuda "$@" -o json >>"$out/$name-new.json" 2>>"$out/$name.err"
    if [[ -n ${OLD_BENCH:-} ]]; then
      timeout 300 "$OLD_BENCH" -m "$gguf" --device cuda "$@" -o json >>"$out/$name-old.json" 2>>"$out/$name.err"
    fi
    if [[ -n ${LLAMA:-} ]]; then
      # shellcheck disable=SC2086
      timeout 300 "$LLAMA/build/bin/llama-bench" -m "$gguf" -fa 1 -ngl 99 ${LLAMA_ARGS:-} -o json \
        >>"$out/$name-llama.json" 2>>"$out/$name.err"
    fi
  done
  [[ -n ${OLD_BENCH:-} ]] && sides=("old=$out/$name-old.json" "${sides[@]}")
  [[ -n ${LLAMA:-} ]] && sides=("llama.cpp=$out/$name-llama.json" "${sides[@]}")
  row "interleaved $name $*" "" "$((SECONDS - t0)) s"
  python3 scripts/ab_summary.py "${sides[@]}" 2>&1 | sed 's/^/    /' | tee -a "$summary" >/dev/null
}

# This build against an older one (OLD_BENCH, or .dev/old-bench.xz staged beside the payload) on
# the 7B shape, interleaved: the no-regression check of a refactor.
step_ab() {
  if [[ -z ${OLD_BENCH:-} && -f .dev/old-bench.xz ]]; then
    python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open('.dev/old-bench.xz'), open('/tmp/old-minfer-bench','wb'))"
    chmod +x /tmp/old-minfer-bench
    OLD_BENCH=/tmp/old-minfer-bench
  fi
  [[ -n ${OLD_BENCH:-} ]] || { row "A/B" FAIL "no OLD_BENCH"; return; }
  make_model qwen2.5-7b-q4km --shape qwen2.5-7b || return
  LLAMA='' interleaved ab-7b "$models/qwen2.5-7b-q4km.gguf" -p 512 -n 128 -r 5
}

# The architectures issue's speed check: Llama-3.1-8B and Qwen3-30B-A3B shapes (Q4_K_M) against
# llama.cpp (LLAMA), interleaved; the Qwen2.5-7B ratios beside them.
# ARCH="qwen7b llama8b a3b" (the default) picks the models, so the step can span device calls.
step_arch() {
  local a
  for a in ${ARCH:-qwen7b llama8b a3b}; do
    case $a in
      qwen7b) make_model qwen2.5-7b-q4km --shape qwen2.5-7b &&
        OLD_BENCH='' LLAMA_ARGS="-p 512 -n 128 -r 3" interleaved arch-qwen7b "$models/qwen2.5-7b-q4km.gguf" -p 512 -n 128 -r 3 ;;
      llama8b) VOCAB=.devb/llama3-vocab.gguf make_model llama3.1-8b-q4km --shape llama3.1-8b &&
        OLD_BENCH='' LLAMA_ARGS="-p 512 -n 128 -r 3" interleaved arch-llama8b "$models/llama3.1-8b-q4km.gguf" -p 512 -n 128 -r 3 ;;
      a3b) make_model qwen3-30b-a3b-q4km --shape qwen3-30b-a3b &&
        OLD_BENCH='' LLAMA_ARGS="-p 512 -n 128 -r 3" interleaved arch-a3b "$models/qwen3-30b-a3b-q4km.gguf" -p 512 -n 128 -r 3 ;;
      *) row "arch $a" FAIL "unknown model (qwen7b, llama8b, a3b)" ;;
    esac
  done
}

for s in "${steps[@]}"; do
  case "$s" in
    env) step_env ;;
    tests) step_env; step_tests ;;
    bench) bench_model qwen2.5-0.5b-q4km --shape qwen2.5-0.5b ;;
    bench7b) bench_model qwen2.5-7b-q4km --shape qwen2.5-7b ;;
    profile) step_profile ;;
    decprof) step_decprof ;;
    table) step_table ;;
    generate) step_generate ;;
    attn) step_attn ;;
    spec) step_spec ;;
    verify) step_verify ;;
    batched) step_batched ;;
    long) step_long ;;
    attnprof) step_attnprof ;;
    server) step_server ;;
    ab) step_ab ;;
    arch) step_arch ;;
    *) echo "gpu_check: unknown step '$s'" >&2; exit 2 ;;
  esac
done
echo
echo "| step | status | detail |"
echo "| --- | --- | --- |"
cat "$summary"
