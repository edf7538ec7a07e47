// Llama (LlamaForCausalLM; Llama 2, Llama 3, 3.1, 3.2): pre-norm decoder, GQA attention with
// optional q/k/v bias (attention_bias), RoPE in GGUF's NORMAL pairing (the converter permutes wq
// and wk from Transformers' rotate_half), Llama 3 frequency factors (rope_freqs.weight), SwiGLU
// FFN, optionally tied output.
#pragma once

#include "models/registry.h"

namespace minfer::models {
std::unique_ptr<Model> make_llama(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard);
}
