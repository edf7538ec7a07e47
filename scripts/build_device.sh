#!/usr/bin/env bash
# Builds minfer for the GPU machine and stages what it needs in .dev/ (gitignored; carried to the
# device with `carry: [".dev"]`):
#   .dev/payload.tar.xz  bin/ (minfer-bench, minfer-mkmodel, minfer-server, ...), tests/ (the GPU
#                        test binaries) and lib/ (cpp-httplib and its dependencies, for the
#                        server); the binaries share one large CUDA fatbin, so xz packs ~75 MB
#                        into ~3 MB. scripts/gpu_check.sh unpacks it into .dev/ on the device.
#   .dev/fixtures/       the fixtures the GPU tests read (MINFER_FIXTURES=.dev/fixtures)
#   .devb/               llama.cpp's anchor script and source, the Llama-3 vocabulary (xz); carry
#                        both: `carry: [".dev", ".devb"]`
# The build is Release with the CUDA backend and MINFER_PORTABLE=ON (fmt header-only, static
# PCRE2/utf8proc: the GPU host has none of them as shared libraries). It fails if a binary
# depends on a shared library other than libc/libm/libstdc++/libgcc/cuBLAS/libcuda, or if .dev
# grows past 60 MB. NCCL is not one of them: a multi-GPU group loads libnccl.so.2 at run time
# (dlopen; scripts/gpu_check.sh puts it on LD_LIBRARY_PATH where the loader cannot see it).
#   scripts/build_device.sh [extra cmake args...]
# MINFER_DEVICE_FIXTURES=rope stages the scaled-RoPE fixture (qwen2-yarn-s) instead of the default
# set: both do not fit one 60 MB .dev. The GPU tests skip the fixtures that are absent, so run
# test_cuda_models --gtest_filter='*yarn*' on the device with this set.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-device"
dev="$root/.dev"
fixtures_src="${MINFER_FIXTURES_SRC:-$root/../shared/fixtures}"
jobs="${JOBS:-2}"
fixture_set="${MINFER_DEVICE_FIXTURES:-default}"
[[ $fixture_set == default || $fixture_set == rope ]] || { echo "build_device: MINFER_DEVICE_FIXTURES is default or rope" >&2; exit 1; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINFER_CUDA=ON -DMINFER_PORTABLE=ON \
  -DMINFER_SANITIZE=OFF "$@" >/dev/null
# What the device runs: the GPU tests and the programs gpu_check.sh uses (those that exist).
want=(test_backend_ops test_cuda_ops test_cuda_models test_cuda_parallel minfer-bench minfer-batched-bench minfer-mkmodel minfer-generate minfer-perplexity minfer-speculative
      minfer-server minfer-server-load)
have=$(ninja -C "$build" -t targets all | sed 's/:.*//')
targets=()
for t in "${want[@]}"; do grep -qx "$t" <<<"$have" && targets+=("$t"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

rm -rf "$dev"
mkdir -p "$dev/bin" "$dev/tests" "$dev/fixtures"
for t in "${targets[@]}"; do
  if [[ -x "$build/tests/$t" ]]; then cp "$build/tests/$t" "$dev/tests/"; else cp "$build/bin/$t" "$dev/bin/"; fi
done
strip --strip-unneeded "$dev"/bin/* "$dev"/tests/* 2>/dev/null || true
# minfer-server links cpp-httplib, which Debian ships as a shared library only: it and what it
# needs (OpenSSL, zlib, brotli) go to .dev/lib, found through the binaries' RPATH $ORIGIN/../lib.
system_lib() {
  case "$1" in
    linux-vdso*|libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|/lib64/ld-linux*|libcublas.so*|libcublasLt.so*|libcuda.so*|libdl.so*|librt.so*|libpthread.so*) return 0 ;;
    *) return 1 ;;
  esac
}
mkdir -p "$dev/lib"
for f in "$dev"/bin/minfer-server*; do
  [[ -e $f ]] || continue
  while read -r lib path; do
    system_lib "$lib" || [[ -z $path || -e "$dev/lib/$lib" ]] || cp -L "$path" "$dev/lib/$lib"
  done < <(ldd "$f" | awk '$2 == "=>" {print $1, $3}')
done

# Only the fixtures the GPU tests (tests/cuda) and the checks in scripts/gpu_check.sh read.
copy_fixture() { mkdir -p "$dev/fixtures/$(dirname "$1")"; cp "$fixtures_src/$1" "$dev/fixtures/$1"; }
if [[ $fixture_set == rope ]]; then
  # qwen2-yarn-s (YaRN): test_cuda_models --gtest_filter='*yarn*' (refs, perplexity -c 256 / 2048).
  m=qwen2-yarn-s
  for f in $m/$m-f16.gguf $m/$m-Q4_K_M.gguf $m/refs.json $m/ref{0,1,2,3,4}.logits.f32 text/python-val.txt; do
    copy_fixture "$f"
  done
else
for m in qwen2-s qwen3-xs; do
  copy_fixture "$m/$m-f16.gguf"
  copy_fixture "$m/refs.json"
  for i in 0 1 2 3 4; do copy_fixture "$m/ref$i.logits.f32"; done
done
copy_fixture qwen3-s/refs.json
for i in 0 1 2 3 4; do copy_fixture "qwen3-s/ref$i.logits.f32"; done
# mkmodel --vocab (models llama.cpp can load too), xz-packed: 5.9 MB -> 1.3 MB of the carry;
# gpu_check.sh unpacks it.
mkdir -p "$dev/fixtures/tokenizer"
xz -9 -T1 -c "$fixtures_src/tokenizer/qwen-vocab.gguf" >"$dev/fixtures/tokenizer/qwen-vocab.gguf.xz"
for f in qwen2-s/qwen2-s-Q4_K_M.gguf qwen2-s/qwen2-s-Q5_K_M.gguf qwen3-s/qwen3-s-Q4_K_M.gguf \
         qwen3-xs/qwen3-xs-Q8_0.gguf qwen3-xs/qwen3-xs-Q4_0.gguf qwen3-xs/qwen3-xs-Q5_1.gguf text/python-val.txt; do
  copy_fixture "$f"
done
fi

# Shared-library check: only what the GPU host has.
bad=0
for f in "$dev"/bin/* "$dev"/tests/* "$dev"/lib/*; do
  [[ -e $f ]] || continue
  while read -r lib; do
    system_lib "$lib" && continue
    [[ -e "$dev/lib/$lib" ]] && continue  # staged beside the binaries (found through RPATH)
    echo "build_device: $(basename "$f") needs $lib" >&2
    bad=1
  done < <(ldd "$f" | awk '{print $1}')
done
[[ $bad == 0 ]] || { echo "build_device: unportable dependencies (see above)" >&2; exit 1; }

# .devb/ (carried beside .dev: both fit the 64 MiB a call carries): the speed anchor (llama.cpp's
# build script and source, for LLAMA=... runs) and the Llama-3 vocabulary, xz-packed (mkmodel
# --vocab for the llama3.1-8b shape in gpu_check.sh arch).
devb="$root/.devb"
rm -rf "$devb"
mkdir -p "$devb/anchor"
cp "$fixtures_src/../anchor/build_llama_cpp.sh" "$fixtures_src"/../anchor/llama.cpp-*-src.tar.xz "$devb/anchor/" 2>/dev/null ||
  echo "build_device: no ../shared/anchor (llama.cpp runs will be unavailable)" >&2
xz -9 -T1 -c "$fixtures_src/tokenizer/llama3-vocab.gguf" >"$devb/llama3-vocab.gguf.xz" 2>/dev/null || rm -f "$devb/llama3-vocab.gguf.xz"

n_bin=$(ls "$dev/bin" | wc -l)
n_tests=$(ls "$dev/tests" | wc -l)
# One dictionary over the whole stream: every binary carries the same CUDA fatbin, and a window
# that holds them all (512 MiB) packs them into ~18 MB at preset 1 in seconds, where -9e's 64 MiB
# window packed 26 MB in ~2.5 minutes.
(cd "$dev" && tar cf - bin tests lib | xz -T1 --lzma2=preset=1,dict=512MiB >payload.tar.xz && rm -rf bin tests lib)
size_kb=$(du -sk "$dev" | cut -f1)
echo "build_device: .dev holds $((size_kb / 1024)) MB ($n_bin programs, $n_tests test binaries in payload.tar.xz)"
(( size_kb < 60 * 1024 )) || { echo "build_device: .dev is over 60 MB" >&2; exit 1; }
