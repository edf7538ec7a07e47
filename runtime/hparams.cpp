#include <fmt/format.h>

#include "gguf/gguf.h"
#include "runtime/model.h"

namespace minfer {

HParams HParams::from_gguf(const gguf::File& f) {
  HParams h;
  h.arch = std::string(f.get_string("general.architecture"));
  h.name = std::string(f.get_string_or("general.name", ""));
  auto key = [&](const char* k) { return h.arch + "." + k; };
  h.n_layer = static_cast<int32_t>(f.get_u32(key("block_count")));
  h.n_embd = static_cast<int32_t>(f.get_u32(key("embedding_length")));
  h.n_ff = static_cast<int32_t>(f.get_u32(key("feed_forward_length")));
  h.n_head = static_cast<int32_t>(f.get_u32(key("attention.head_count")));
  h.n_head_kv = static_cast<int32_t>(f.get_u32_or(key("attention.head_count_kv"), static_cast<uint32_t>(h.n_head)));
  h.n_ctx_train = static_cast<int32_t>(f.get_u32_or(key("context_length"), 2048));
  h.rope_freq_base = f.get_f32_or(key("rope.freq_base"), 10000.0f);
  h.rms_eps = f.get_f32_or(key("attention.layer_norm_rms_epsilon"), 1e-6f);
  if (h.n_layer <= 0 || h.n_embd <= 0 || h.n_head <= 0 || h.n_head_kv <= 0 || h.n_ff <= 0)
    throw std::invalid_argument(fmt::format("{}: non-positive hyper-parameters (layers {}, n_embd {}, heads {}/{}, n_ff {})",
                                            f.name(), h.n_layer, h.n_embd, h.n_head, h.n_head_kv, h.n_ff));
  if (h.n_head % h.n_head_kv != 0)
    throw std::invalid_argument(fmt::format("{}: n_head {} is not a multiple of n_head_kv {}", f.name(), h.n_head, h.n_head_kv));
  h.head_dim = static_cast<int32_t>(f.get_u32_or(key("attention.key_length"), static_cast<uint32_t>(h.n_embd / h.n_head)));
  h.head_dim_v = static_cast<int32_t>(f.get_u32_or(key("attention.value_length"), static_cast<uint32_t>(h.head_dim)));
  h.n_rot = static_cast<int32_t>(f.get_u32_or(key("rope.dimension_count"), static_cast<uint32_t>(h.head_dim)));
  if (const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight")) h.n_vocab = static_cast<int32_t>(emb->ne[1]);
  else throw std::invalid_argument(fmt::format("{}: no token_embd.weight tensor", f.name()));
  h.rope_mode = ops::rope_mode_for_arch(h.arch);
  return h;
}

}  // namespace minfer
