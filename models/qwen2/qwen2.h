// Qwen2 / Qwen2.5 (Qwen2ForCausalLM): pre-norm decoder with q/k/v bias, NEOX RoPE, SwiGLU FFN,
// tied or untied output.
#pragma once

#include "models/registry.h"

namespace minfer::models {
std::unique_ptr<Model> make_qwen2(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard);
}
