// Qwen3 (Qwen3ForCausalLM): pre-norm decoder with per-head RMSNorm on q and k, no q/k/v bias,
// head_dim from metadata (attention.key_length), NEOX RoPE, SwiGLU FFN, optionally tied output.
#pragma once

#include "models/registry.h"

namespace minfer::models {
std::unique_ptr<Model> make_qwen3(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard);
}
