#!/usr/bin/env bash
# Builds the GGUF reader fuzzer with clang (libFuzzer + ASan + UBSan) in its own build dir and
# runs it for N seconds (default 60), seeded with tiny valid files written by gguf::Writer.
#   gguf/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]
# Env: CXX (default clang++), FUZZ_BUILD_DIR (default <repo>/build-fuzz), FUZZ_JOBS (default 1).
# Crashing inputs land in $FUZZ_BUILD_DIR/artifacts/; the grown corpus in $FUZZ_BUILD_DIR/corpus/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
secs="${1:-60}"
shift || true
cxx="${CXX:-clang++}"
build="${FUZZ_BUILD_DIR:-$repo/build-fuzz}"
mkdir -p "$build/corpus" "$build/artifacts" "$build/seeds"

srcs=("$repo"/gguf/{escape,mapped_file,reader,types,value,writer}.cpp "$repo/tensor/dtype.cpp")
common=(-std=c++20 -O1 -g -I"$repo" -DFMT_HEADER_ONLY)

echo "building seed generator and fuzzer with $cxx ..."
"$cxx" "${common[@]}" "${srcs[@]}" "$here/make_seeds.cpp" -o "$build/make_seeds"
"$cxx" "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${srcs[@]}" "$here/fuzz_gguf_reader.cpp" -o "$build/fuzz_gguf_reader"

"$build/make_seeds" "$build/seeds"
parallel=()
if [[ "${FUZZ_JOBS:-1}" -gt 1 ]]; then parallel=(-fork="$FUZZ_JOBS"); fi
echo "running for ${secs}s ..."
"$build/fuzz_gguf_reader" -max_total_time="$secs" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -dict="$here/gguf.dict" "${parallel[@]}" \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 \
  "$@" "$build/corpus" "$build/seeds"
