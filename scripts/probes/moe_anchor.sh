#!/usr/bin/env bash
# Device calls (carry [".dev", ".devb", ".devq"]: .dev from scripts/build_device.sh, .devb its
# anchor, .devq/base-bench.xz the base commit's minfer-bench, xz'd): the full 48-block
# Qwen3-30B-A3B-shaped Q4_K_M with this build, the base build and llama.cpp, interleaved, same
# file, same run. Resumable: the llama.cpp build and the model are made in the background (they
# outlive a call while the machine stays warm), so a second call right after the first picks up
# where it stopped. TESTS=1 runs the MoE GPU tests first (while those two are being made).
set -o pipefail
source "$(dirname "$0")/common.sh"
llama_start
untar .dev/payload.tar.xz .dev
unxz .devq/base-bench.xz /tmp/base/bin/minfer-bench x
vocab=/tmp/qwen-vocab.gguf
unxz .dev/fixtures/tokenizer/qwen-vocab.gguf.xz $vocab
a3b=/tmp/a3b48.gguf
if [[ ! -f $a3b && ! -f $a3b.started ]]; then
  touch $a3b.started
  setsid bash -c "$PWD/.dev/bin/minfer-mkmodel -q -o $a3b.part --shape qwen3-30b-a3b --type Q4_K_M --vocab $vocab \
    > /tmp/mk48.log 2>&1 && mv $a3b.part $a3b" < /dev/null > /dev/null 2>&1 &
fi
nvidia-smi --query-gpu=name --format=csv,noheader

if [[ ${TESTS:-0} == 1 ]]; then
  export MINFER_FIXTURES=.dev/fixtures
  gtest t_cuda_ops 150 .dev/tests/test_cuda_ops 'CudaFused*:CudaRewrite*:CudaGraph*:CudaMoe*:CudaMulMatId*:CudaBackendErrors*'
  gtest t_ops 120 .dev/tests/test_backend_ops \
    'cuda.*mul_mat_id*:cuda.*top_k*:cuda.*soft_max*:cuda.*rms_norm*:cuda.*get_rows*:cuda.mul_mat_q4_K*:Coverage.cuda'
  gtest t_models 120 .dev/tests/test_cuda_models '*qwen3moe*'
  grep -E '^\[ cuda|ppl|perplexity' $out/t_models.log | head -8
fi

while [[ ! -f $a3b ]] && left ${MODEL_WAIT:-420}; do sleep 5; done
echo "a3b48 model: $([[ -f $a3b ]] && echo ready || echo not yet) at $((SECONDS - t0)) s"
llama_wait ${MODEL_WAIT:-420}
[[ -f $a3b ]] || exit 0
for i in 1 2; do
  left ${BENCH_LEFT:-480} || break
  table .dev minfer-bench -m $a3b --device cuda -p 512 -n 128 -r 3
  table /tmp/base minfer-bench -m $a3b --device cuda -p 512 -n 128 -r 3
  llama_bench -m $a3b -p 512 -n 128 -r 3
done
echo "done $((SECONDS - t0)) s"
