#!/usr/bin/env bash
# Installs minfer's build dependencies (Debian/Ubuntu packages) when missing, then configures and
# builds into ./build. Safe to run again: it only rebuilds what changed.
#   MINFER_BUILD_DIR   build directory (default: build)
#   MINFER_CMAKE_ARGS  extra CMake arguments (e.g. -DMINFER_CUDA=OFF)
#   MINFER_TARGETS     targets to build (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libeigen3-dev libfmt-dev libgtest-dev libgmock-dev
          libbenchmark-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev
          python3-jinja2)  # python3-jinja2: the chat-template tests' oracle (tests/chat/render_jinja2.py)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build=${MINFER_BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MINFER_CMAKE_ARGS:-} >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" ${MINFER_TARGETS:+--target $MINFER_TARGETS}
