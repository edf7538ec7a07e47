// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's attention (per-head q/k RMSNorm, NEOX RoPE, GQA) with
// a sparse FFN in every layer: a router picks expert_used_count of expert_count SwiGLU experts per
// token, whose outputs are summed with the renormalized router probabilities.
#pragma once

#include "models/registry.h"

namespace minfer::models {
std::unique_ptr<Model> make_qwen3moe(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard);
}
