#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>

#include "gguf/gguf.h"
#include "runtime/model.h"

namespace minfer {

HParams HParams::from_gguf(const gguf::File& f, ops::RopeMode rope_mode) {
  HParams h;
  h.arch = std::string(f.get_string("general.architecture"));
  h.name = std::string(f.get_string_or("general.name", ""));
  auto key = [&](const char* k) { return h.arch + "." + k; };
  // The int32 hyper-parameters: present (or defaulted) and in [1, INT32_MAX]; a u32 past
  // INT32_MAX would wrap negative, a 0 would surface later as a message about -c or a shape.
  const auto i32 = [&](const char* k, std::optional<uint32_t> def = std::nullopt) {
    const uint32_t v = def ? f.get_u32_or(key(k), *def) : f.get_u32(key(k));
    if (v == 0 || v > static_cast<uint32_t>(INT32_MAX))
      throw std::invalid_argument(fmt::format("{}: {} is {} (must be in [1, {}])", f.name(), key(k), v, INT32_MAX));
    return static_cast<int32_t>(v);
  };
  h.n_layer = i32("block_count");
  h.n_embd = i32("embedding_length");
  h.n_ff = i32("feed_forward_length");
  h.n_head = i32("attention.head_count");
  h.n_head_kv = i32("attention.head_count_kv", static_cast<uint32_t>(h.n_head));
  h.n_ctx_train = i32("context_length", 2048);
  h.rope_freq_base = f.get_f32_or(key("rope.freq_base"), 10000.0f);
  h.rms_eps = f.get_f32_or(key("attention.layer_norm_rms_epsilon"), 1e-6f);
  if (h.n_head % h.n_head_kv != 0)
    throw std::invalid_argument(fmt::format("{}: n_head {} is not a multiple of n_head_kv {}", f.name(), h.n_head, h.n_head_kv));
  h.head_dim = i32("attention.key_length", static_cast<uint32_t>(h.n_embd / h.n_head));
  h.head_dim_v = i32("attention.value_length", static_cast<uint32_t>(h.head_dim));
  h.n_rot = static_cast<int32_t>(f.get_u32_or(key("rope.dimension_count"), static_cast<uint32_t>(h.head_dim)));
  if (const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight")) h.n_vocab = static_cast<int32_t>(emb->ne[1]);
  else
    throw std::invalid_argument(fmt::format("{}: no token_embd.weight tensor{}", f.name(),
                                            f.tensors().empty() ? ": a vocab-only file (tokenizer only, no weights; "
                                                                  "minfer-tokenize reads it)"
                                                                : ""));
  // Token ids index the embedding rows (more rows than tokens is padding, as in Qwen's files):
  // a token past them would fail only when a prompt or the sampler reached it.
  if (const gguf::Value* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->array_size() > static_cast<uint64_t>(h.n_vocab))
    throw std::invalid_argument(fmt::format("{}: the vocabulary has {} tokens but token_embd.weight has {} rows", f.name(),
                                            tokens->array_size(), h.n_vocab));
  h.rope_mode = rope_mode;
  h.n_expert = static_cast<int32_t>(f.get_u32_or(key("expert_count"), 0));
  h.n_expert_used = static_cast<int32_t>(f.get_u32_or(key("expert_used_count"), 0));
  h.n_ff_exp = static_cast<int32_t>(f.get_u32_or(key("expert_feed_forward_length"), 0));
  if (h.n_expert == 0 && h.n_expert_used > 0)
    throw std::invalid_argument(fmt::format("{}: {} is {} but {} is missing or 0", f.name(), key("expert_used_count"),
                                            h.n_expert_used, key("expert_count")));
  if (h.n_expert < 0 || h.n_expert_used < 0 || h.n_expert_used > h.n_expert || (h.n_expert > 0 && h.n_expert_used == 0))
    throw std::invalid_argument(fmt::format("{}: {} experts used of {} (expert_used_count must be in [1, expert_count])",
                                            f.name(), h.n_expert_used, h.n_expert));

  // RoPE scaling: llama.cpp's llama_model::load_hparams reads the same keys with these defaults
  // (a factor without a type scales linearly there too).
  float factor = f.get_f32_or(key("rope.scaling.factor"), 0.0f);
  if (factor == 0.0f) factor = f.get_f32_or(key("rope.scale_linear"), 0.0f);
  h.rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  const std::string scaling(f.get_string_or(key("rope.scaling.type"), factor == 0.0f ? "none" : "linear"));
  const auto type = rope_scaling_from_name(scaling);
  if (!type)
    throw std::invalid_argument(
        fmt::format("{}: unsupported {} '{}' (supported: none, linear, yarn)", f.name(), key("rope.scaling.type"), scaling));
  h.rope_scaling = *type;
  h.rope_n_ctx_orig = static_cast<int32_t>(
      f.get_u32_or(key("rope.scaling.original_context_length"), static_cast<uint32_t>(h.n_ctx_train)));
  h.rope_attn_factor = f.get_f32_or(key("rope.scaling.attn_factor"), 1.0f);
  h.yarn_ext_factor = f.get_f32_or(key("rope.scaling.yarn_ext_factor"), -1.0f);
  h.yarn_attn_factor = f.get_f32_or(key("rope.scaling.yarn_attn_factor"), 0.0f);
  h.yarn_beta_fast = f.get_f32_or(key("rope.scaling.yarn_beta_fast"), 32.0f);
  h.yarn_beta_slow = f.get_f32_or(key("rope.scaling.yarn_beta_slow"), 1.0f);
  try {
    h.check_rope();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", f.name(), e.what()));
  }
  return h;
}

std::optional<RopeScaling> rope_scaling_from_name(std::string_view name) {
  if (name == "none") return RopeScaling::NONE;
  if (name == "linear") return RopeScaling::LINEAR;
  if (name == "yarn") return RopeScaling::YARN;
  return std::nullopt;
}

std::string_view rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::NONE: return "none";
    case RopeScaling::LINEAR: return "linear";
    case RopeScaling::YARN: return "yarn";
  }
  return "?";
}

ops::RopeParams HParams::rope_params() const {
  ops::RopeParams r;
  r.n_rot = n_rot;
  r.mode = rope_mode;
  r.freq_base = rope_freq_base;
  r.freq_scale = rope_scaling == RopeScaling::NONE ? 1.0f : rope_freq_scale;  // none never scales
  r.ext_factor = yarn_ext_factor >= 0.0f ? yarn_ext_factor : rope_scaling == RopeScaling::YARN ? 1.0f : 0.0f;
  r.beta_fast = yarn_beta_fast;
  r.beta_slow = yarn_beta_slow;
  r.n_ctx_orig = rope_n_ctx_orig > 0 ? rope_n_ctx_orig : n_ctx_train;
  // The magnitude: Transformers' attention_factor (yarn_attn_factor) or YaRN's default
  // 0.1 ln(factor) + 1, times llama.cpp's rope.scaling.attn_factor.
  double m = 1.0;
  if (yarn_attn_factor > 0.0f) m = yarn_attn_factor;
  else if (r.ext_factor != 0.0f) m = ops::yarn_mscale(1.0 / static_cast<double>(r.freq_scale));
  r.attn_factor = static_cast<float>(m * rope_attn_factor);
  return r;
}

void HParams::check_rope() const {
  if (std::string e = ops::rope_params_error(rope_params(), head_dim); !e.empty())
    throw std::invalid_argument("RoPE: " + e);
}

void HParams::apply(const RopeOverrides& o) {
  HParams h = *this;
  if (o.scaling) h.rope_scaling = *o.scaling;
  if (o.scale) {
    if (!(*o.scale > 0.0f)) throw std::invalid_argument(fmt::format("RoPE: scale factor must be > 0, got {}", *o.scale));
    h.rope_freq_scale = 1.0f / *o.scale;
  }
  if (o.freq_scale) h.rope_freq_scale = *o.freq_scale;
  if (o.freq_base) h.rope_freq_base = *o.freq_base;
  if (o.yarn_orig_ctx) h.rope_n_ctx_orig = *o.yarn_orig_ctx;
  if (o.yarn_ext_factor) h.yarn_ext_factor = *o.yarn_ext_factor;
  if (o.yarn_attn_factor) h.yarn_attn_factor = *o.yarn_attn_factor;
  if (o.yarn_beta_slow) h.yarn_beta_slow = *o.yarn_beta_slow;
  if (o.yarn_beta_fast) h.yarn_beta_fast = *o.yarn_beta_fast;
  h.check_rope();
  *this = h;
}

HParams HParams::for_shard(const Shard& shard) const {
  if (!shard.split()) return *this;
  auto check = [&](int32_t v, const char* what) {
    if (v % shard.n != 0)
      throw std::invalid_argument(fmt::format("tensor parallelism over {} ranks needs {} ({}) to be a multiple of {}", shard.n,
                                              what, v, shard.n));
    return v / shard.n;
  };
  HParams h = *this;
  h.n_head = check(n_head, "attention.head_count");
  h.n_head_kv = check(n_head_kv, "attention.head_count_kv");
  h.n_ff = check(n_ff, "feed_forward_length");
  // The vocab-parallel embedding / LM head and the expert split take equal ranges of rows and
  // experts (no padded last shard); both counts stay whole in h: the logits are gathered whole,
  // the router scores every expert.
  check(n_vocab, "the vocabulary size");
  if (n_expert > 0) check(n_expert, "expert_count");
  return h;
}

}  // namespace minfer
