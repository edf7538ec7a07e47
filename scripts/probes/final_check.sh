#!/usr/bin/env bash
# The GPU suites on the binaries scripts/build_device.sh staged in .dev (carry [".dev"]), with a
# time limit per binary: the model tests first (fixtures), then every CUDA op case, then the CUDA op
# tests. Environment: OPS_FILTER / CUDA_OPS_FILTER (gtest filters of the last two, default every
# CUDA case / every test), T_MODELS / T_OPS / T_CUDA_OPS (their time limits in seconds).
set -o pipefail
source "$(dirname "$0")/common.sh"
export MINFER_FIXTURES=.dev/fixtures
untar .dev/payload.tar.xz .dev
unxz .dev/fixtures/tokenizer/qwen-vocab.gguf.xz .dev/fixtures/tokenizer/qwen-vocab.gguf
gtest t_models ${T_MODELS:-260} .dev/tests/test_cuda_models
grep -hE '^\[ (cuda|ppl|logits|greedy|spec)' $out/t_models.log | head -30
gtest t_ops ${T_OPS:-200} .dev/tests/test_backend_ops "${OPS_FILTER:-cuda.*:Coverage.cuda}"
echo "test_backend_ops skipped $(grep -cE '^\[  SKIPPED \] cuda' $out/t_ops.log)"
gtest t_cuda_ops ${T_CUDA_OPS:-400} .dev/tests/test_cuda_ops "${CUDA_OPS_FILTER:-*}"
