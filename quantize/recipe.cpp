// Rules transcribed from llama.cpp src/llama-quant.cpp (llama_tensor_get_type_impl and helpers),
// keeping its branch order; the IQ-only branches are left out because those file types are not
// accepted (quantize/ftype.h).
#include "quantize/recipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "gguf/gguf.h"

namespace minfer::quantize {
namespace {

enum class Category {
  TOKEN_EMBD,
  ATTENTION_Q,
  ATTENTION_V,
  ATTENTION_K,
  ATTENTION_QKV,
  ATTENTION_KV_B,
  ATTENTION_OUTPUT,
  FFN_UP,
  FFN_GATE,
  FFN_DOWN,
  OUTPUT,
  OTHER,
};

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::OUTPUT;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::TOKEN_EMBD;
  if (contains(name, "attn_qkv.weight")) return Category::ATTENTION_QKV;
  if (contains(name, "attn_kv_b.weight")) return Category::ATTENTION_KV_B;
  if (contains(name, "attn_v.weight")) return Category::ATTENTION_V;
  if (contains(name, "attn_k.weight")) return Category::ATTENTION_K;
  if (contains(name, "attn_q.weight")) return Category::ATTENTION_Q;
  if (contains(name, "attn_output.weight")) return Category::ATTENTION_OUTPUT;
  if (contains(name, "ffn_up")) return Category::FFN_UP;
  if (contains(name, "ffn_gate")) return Category::FFN_GATE;
  if (contains(name, "ffn_down")) return Category::FFN_DOWN;
  return Category::OTHER;
}

bool is_attn_v_like(Category c) {
  return c == Category::ATTENTION_V || c == Category::ATTENTION_QKV || c == Category::ATTENTION_KV_B;
}

// sscanf(name, "blk.%d.", &layer): the integer after "blk.", if any.
std::optional<int> block_index(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  std::string_view rest = name.substr(4);
  if (!rest.empty() && rest[0] == '+') rest.remove_prefix(1);
  int v = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

// Sub-strings of tensors llama.cpp never quantizes (tensor_allows_quantization).
constexpr std::string_view kKeepSubstrings[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
    "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
    "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
    "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd",
    "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd"};

struct State {
  const ModelInfo& model;
  FileType ftype;
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int n_ffn_down = 0, i_ffn_down = 0;
  int n_ffn_gate = 0, i_ffn_gate = 0;
  int n_ffn_up = 0, i_ffn_up = 0;
  bool has_tied_embeddings = true;

  bool falcon() const { return model.arch == "falcon"; }
  int n_gqa() const { return model.n_head_kv > 0 ? model.n_head / model.n_head_kv : 0; }
  // llama.cpp sets LLM_TYPE_70B for an 80-layer llama with grouped-query attention.
  bool is_70b() const { return model.arch == "llama" && model.n_layer == 80 && model.n_head != model.n_head_kv; }
};

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

std::pair<int, int> layer_info(const State& s, int i_layer, int n_layer, std::string_view name) {
  if (std::max(1, s.model.n_expert) > 1) {
    // Expert tensors need not be consecutive, so the layer comes from the name.
    const auto b = block_index(name);
    if (!b) throw std::invalid_argument(fmt::format("failed to determine the layer of tensor {}", name));
    if (*b < 0 || *b >= n_layer)
      throw std::invalid_argument(fmt::format("bad layer {} for tensor {} (must be in [0, {}))", *b, name, n_layer));
    i_layer = *b;
  }
  return {i_layer, n_layer};
}

DType mix_type(State& s, DType new_type, const TensorDesc& t, Category cat) {
  using F = FileType;
  const F ftype = s.ftype;
  if (cat == Category::OUTPUT || (s.has_tied_embeddings && cat == Category::TOKEN_EMBD)) {
    // The output projection (or the token embedding it shares) gets more bits.
    const int64_t nx = t.ne[0];
    const int64_t qk = dtype_block_size(new_type);
    if (s.falcon() || nx % qk != 0) new_type = DType::Q8_0;
    else if (new_type != DType::Q8_0) new_type = DType::Q6_K;
  } else if (cat == Category::TOKEN_EMBD) {
    // Only IQ / ternary mixes change the untied token embedding.
  } else if (is_attn_v_like(cat)) {
    if (ftype == F::MOSTLY_Q2_K) new_type = s.n_gqa() >= 4 ? DType::Q4_K : DType::Q3_K;
    else if (ftype == F::MOSTLY_Q3_K_M) new_type = s.i_attention_wv < 2 ? DType::Q5_K : DType::Q4_K;
    else if (ftype == F::MOSTLY_Q3_K_L) new_type = DType::Q5_K;
    else if ((ftype == F::MOSTLY_Q4_K_M || ftype == F::MOSTLY_Q5_K_M) &&
             use_more_bits(s.i_attention_wv, s.n_attention_wv))
      new_type = DType::Q6_K;
    else if (ftype == F::MOSTLY_Q4_K_S && s.i_attention_wv < 4) new_type = DType::Q5_K;
    if (s.is_70b() && (new_type == DType::Q3_K || new_type == DType::Q4_K)) new_type = DType::Q5_K;
    if (s.model.n_expert == 8) new_type = DType::Q8_0;
    ++s.i_attention_wv;
  } else if (cat == Category::ATTENTION_K) {
    if (s.model.n_expert == 8) new_type = DType::Q8_0;
  } else if (cat == Category::ATTENTION_Q) {
    // Only IQ mixes change attn_q.
  } else if (cat == Category::FFN_DOWN) {
    const auto [i_layer, n_layer] = layer_info(s, s.i_ffn_down, s.n_ffn_down, t.name);
    if (ftype == F::MOSTLY_Q2_K) new_type = DType::Q3_K;
    else if (ftype == F::MOSTLY_Q3_K_M)
      new_type = i_layer < n_layer / 16                            ? DType::Q5_K
                 : !s.falcon() || use_more_bits(i_layer, n_layer) ? DType::Q4_K
                                                                   : DType::Q3_K;
    else if (ftype == F::MOSTLY_Q3_K_L) new_type = s.falcon() ? DType::Q4_K : DType::Q5_K;
    else if (ftype == F::MOSTLY_Q4_K_M) {
      if (s.falcon())
        new_type = i_layer < n_layer / 16 ? DType::Q6_K : use_more_bits(i_layer, n_layer) ? DType::Q5_K : DType::Q4_K;
      else if (use_more_bits(i_layer, n_layer))
        new_type = DType::Q6_K;
    } else if (ftype == F::MOSTLY_Q5_K_M && use_more_bits(i_layer, n_layer))
      new_type = DType::Q6_K;
    else if (ftype == F::MOSTLY_Q4_K_S && !s.falcon() && i_layer < n_layer / 8)
      new_type = DType::Q5_K;
    ++s.i_ffn_down;
  } else if (cat == Category::ATTENTION_OUTPUT) {
    if (!s.falcon()) {
      if (s.model.n_expert == 8) {
        if (ftype == F::MOSTLY_Q2_K || ftype == F::MOSTLY_Q3_K_S || ftype == F::MOSTLY_Q3_K_M ||
            ftype == F::MOSTLY_Q4_K_S || ftype == F::MOSTLY_Q4_K_M)
          new_type = DType::Q5_K;
      } else {
        if (ftype == F::MOSTLY_Q2_K) new_type = DType::Q3_K;
        else if (ftype == F::MOSTLY_Q3_K_M) new_type = DType::Q4_K;
        else if (ftype == F::MOSTLY_Q3_K_L) new_type = DType::Q5_K;
      }
    } else if (ftype == F::MOSTLY_Q3_K_L) {
      new_type = DType::Q4_K;
    }
  } else if (cat == Category::FFN_GATE) {
    // (llama.cpp's ATTENTION_QKV branch would stand before this one, but attn_qkv is attn_v-like
    // and never reaches it.)
    layer_info(s, s.i_ffn_gate, s.n_ffn_gate, t.name);  // validates expert tensor names
    ++s.i_ffn_gate;
  } else if (cat == Category::FFN_UP) {
    layer_info(s, s.i_ffn_up, s.n_ffn_up, t.name);
    ++s.i_ffn_up;
  }
  return new_type;
}

// tensor_type_fallback: a dtype whose block does not divide the row length.
TensorPlan fallback(const TensorDesc& t, DType type) {
  const int64_t ncols = t.ne[0];
  if (ncols % dtype_block_size(type) == 0) return {type, false};
  DType r;
  switch (type) {
    case DType::Q2_K:
    case DType::Q3_K: r = DType::Q4_0; break;
    case DType::Q4_K: r = DType::Q5_0; break;
    case DType::Q5_K: r = DType::Q5_1; break;
    case DType::Q6_K: r = DType::Q8_0; break;
    default:
      throw std::invalid_argument(fmt::format(
          "tensor {}: row length {} is not a multiple of {} (required by {}) and there is no fallback for {}",
          t.name, ncols, dtype_block_size(type), dtype_name(type), dtype_name(type)));
  }
  if (ncols % dtype_block_size(r) != 0) r = DType::F16;
  return {r, true};
}

}  // namespace

ModelInfo ModelInfo::from_gguf(const gguf::File& f) {
  ModelInfo m;
  m.arch = std::string(f.get_string("general.architecture"));
  const auto key = [&](const char* k) { return m.arch + "." + k; };
  m.n_layer = f.get_i32(key("block_count"));
  m.n_head = f.get_i32_or(key("attention.head_count"), 0);
  m.n_head_kv = f.get_i32_or(key("attention.head_count_kv"), m.n_head);
  m.n_expert = f.get_i32_or(key("expert_count"), 0);
  return m;
}

bool llama_tensor_less(std::string_view a, std::string_view b) {
  const int la = block_index(a).value_or(-1);
  const int lb = block_index(b).value_or(-1);
  if (la != lb) return la < lb;
  return a < b;
}

int effective_n_dims(const TensorDesc& t) {
  for (int i = 3; i >= 1; --i)
    if (t.ne[i] > 1) return i + 1;
  return 1;
}

bool allows_quantization(const TensorDesc& t) {
  if (effective_n_dims(t) < 2) return false;
  const std::string_view name = t.name;
  if (!name.ends_with("weight")) return false;
  for (std::string_view s : kKeepSubstrings)
    if (contains(name, s)) return false;
  return name != "position_embd.weight" && name != "token_types.weight";
}

std::vector<TensorPlan> plan_types(const QuantTarget& target, const ModelInfo& model,
                                   std::span<const TensorDesc> tensors) {
  State s{model, target.ftype};
  s.n_ffn_down = s.n_ffn_gate = s.n_ffn_up = model.n_layer;
  for (const auto& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v_like(c)) ++s.n_attention_wv;
    if (c == Category::OUTPUT) s.has_tied_embeddings = false;
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return llama_tensor_less(tensors[a].name, tensors[b].name); });

  const DType def = file_type_default_dtype(target.ftype);
  std::vector<TensorPlan> plan(tensors.size());
  for (size_t i : order) {
    const TensorDesc& t = tensors[i];
    if (!allows_quantization(t)) {
      plan[i] = {t.type, false};
    } else if (!dtype_is_quantized(def)) {
      plan[i] = {def, false};
    } else {
      const DType wanted = target.pure ? def : mix_type(s, def, t, category_of(t.name));
      plan[i] = fallback(t, wanted);
    }
  }
  return plan;
}

}  // namespace minfer::quantize
