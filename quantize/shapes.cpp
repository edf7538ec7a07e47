#include "quantize/shapes.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <stdexcept>

namespace minfer::quantize {
namespace {

ModelShape shape(std::string name, std::string display, std::string arch, int32_t n_embd, int32_t n_layer,
                 int32_t n_head, int32_t n_head_kv, int32_t head_dim, int32_t n_ff, int32_t n_vocab,
                 int32_t n_ctx, bool tied) {
  ModelShape s;
  s.name = std::move(name);
  s.display_name = std::move(display);
  s.arch = std::move(arch);
  s.n_embd = n_embd;
  s.n_layer = n_layer;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = head_dim;
  s.n_ff = n_ff;
  s.n_vocab = n_vocab;
  s.n_ctx_train = n_ctx;
  s.tied = tied;
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// meta-llama/Llama-3.1-8B-Instruct's config.json: rope_theta 5e5, rms_norm_eps 1e-5, 131072
// positions, rope_scaling llama3 (factor 8, low 1, high 4, original 8192), untied output.
ModelShape llama31_8b() {
  ModelShape s = shape("llama3.1-8b", "Llama 3.1 8B Instruct", "llama", 4096, 32, 32, 8, 0, 14336, 128256, 131072, false);
  s.rope_freq_base = 500000.0f;
  s.rms_eps = 1e-5f;
  s.llama3_factor = 8.0f;
  s.llama3_low_freq = 1.0f;
  s.llama3_high_freq = 4.0f;
  s.llama3_n_ctx_orig = 8192;
  return s;
}

// Qwen/Qwen3-30B-A3B config.json: 128 experts of moe_intermediate_size 768, 8 per token,
// norm_topk_prob true (the GGUF has no key for it: llama.cpp always renormalizes for qwen3moe);
// intermediate_size 6144 is the converter's feed_forward_length (no dense FFN uses it).
ModelShape qwen3_30b_a3b() {
  ModelShape s = shape("qwen3-30b-a3b", "Qwen3 30B A3B", "qwen3moe", 2048, 48, 32, 4, 128, 6144, 151936, 40960, false);
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_exp = 768;
  return s;
}

}  // namespace

const std::vector<ModelShape>& named_shapes() {
  // config.json of Qwen/Qwen2.5-{0.5B,7B,14B}-Instruct and Qwen/Qwen3-{0.6B,8B}: rope_theta 1e6 and
  // rms_norm_eps 1e-6 for all (the 14B base model says 1e-5 and 131072 positions; the Instruct
  // model, the one people run, says 1e-6 and 32768).
  static const std::vector<ModelShape> shapes = {
      shape("qwen2.5-0.5b", "Qwen2.5 0.5B Instruct", "qwen2", 896, 24, 14, 2, 0, 4864, 151936, 32768, true),
      shape("qwen2.5-7b", "Qwen2.5 7B Instruct", "qwen2", 3584, 28, 28, 4, 0, 18944, 152064, 32768, false),
      shape("qwen2.5-14b", "Qwen2.5 14B Instruct", "qwen2", 5120, 48, 40, 8, 0, 13824, 152064, 32768, false),
      shape("qwen3-0.6b", "Qwen3 0.6B", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 40960, true),
      shape("qwen3-8b", "Qwen3 8B", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, false),
      llama31_8b(),
      qwen3_30b_a3b(),
  };
  return shapes;
}

const ModelShape& find_shape(std::string_view name) {
  std::string names;
  for (const auto& s : named_shapes()) {
    if (iequals(s.name, name)) return s;
    names += (names.empty() ? "" : ", ") + s.name;
  }
  throw std::invalid_argument(fmt::format("unknown shape '{}' (known: {}; or use --arch with custom dimensions)", name, names));
}

void ModelShape::validate(int64_t row_block) const {
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument(fmt::format("model shape {}: {}", name, what));
  };
  if (arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe" && arch != "llama")
    bad(fmt::format("unknown arch '{}' (qwen2, qwen3, qwen3moe or llama)", arch));
  if (arch == "qwen3moe" && (n_expert <= 0 || n_expert_used <= 0 || n_expert_used > n_expert || n_ff_exp <= 0))
    bad(fmt::format("qwen3moe needs n_expert > 0 (got {}), n_expert_used in [1, n_expert] (got {}) and n_ff_exp > 0 (got {})",
                    n_expert, n_expert_used, n_ff_exp));
  const std::pair<const char*, int32_t> dims[] = {{"n_embd", n_embd}, {"n_layer", n_layer}, {"n_head", n_head},
                                                  {"n_head_kv", n_head_kv}, {"n_ff", n_ff}, {"n_vocab", n_vocab},
                                                  {"n_ctx_train", n_ctx_train}};
  for (const auto& [k, v] : dims)
    if (v <= 0) bad(fmt::format("{} = {} must be positive", k, v));
  if (head_dim < 0) bad(fmt::format("head_dim = {} must be positive (0: n_embd / n_head)", head_dim));
  if (n_head % n_head_kv != 0) bad(fmt::format("n_head {} is not a multiple of n_head_kv {}", n_head, n_head_kv));
  if (head_dim == 0 && n_embd % n_head != 0)
    bad(fmt::format("n_embd {} is not a multiple of n_head {} (give --head-dim)", n_embd, n_head));
  const int32_t hd = head_dim_or_default();
  if (hd % 2 != 0) bad(fmt::format("head_dim {} must be even (RoPE rotates pairs)", hd));
  const std::pair<const char*, int64_t> rows[] = {
      {"n_embd", n_embd}, {"n_ff", n_ff}, {"n_head * head_dim", int64_t{n_head} * hd}, {"n_ff_exp", arch == "qwen3moe" ? n_ff_exp : 0}};
  for (const auto& [k, v] : rows)
    if (row_block > 1 && v % row_block != 0)
      bad(fmt::format("{} = {} must be a multiple of {} (the quantization block; float types have none)", k, v, row_block));
  if (!(rope_freq_base > 0) || !(rms_eps > 0)) bad("rope_freq_base and rms_eps must be positive");
  if (llama3_factor != 0.0f) {
    if (arch != "llama") bad(fmt::format("llama3 rope scaling is for llama, not {}", arch));
    if (!(llama3_factor >= 1.0f) || !(llama3_low_freq > 0.0f) || !(llama3_high_freq > llama3_low_freq) ||
        llama3_n_ctx_orig <= 0)
      bad(fmt::format("llama3 rope scaling needs factor >= 1, 0 < low_freq < high_freq, n_ctx_orig > 0 (got {}, {}, {}, {})",
                      llama3_factor, llama3_low_freq, llama3_high_freq, llama3_n_ctx_orig));
  }
}

int64_t ModelShape::n_params() const {
  int64_t n = 0;
  for (const auto& t : shape_tensors(*this)) {
    if (t.fill == Fill::values) continue;  // rope_freqs: computed from the config
    int64_t e = 1;
    for (int64_t d : t.ne) e *= d;
    n += e;
  }
  return n;
}

std::vector<ShapeTensor> shape_tensors(const ModelShape& s) {
  const int64_t E = s.n_embd, F = s.n_ff, V = s.n_vocab, hd = s.head_dim_or_default();
  const int64_t q = s.n_head * hd, kv = s.n_head_kv * hd;
  const bool moe = s.arch == "qwen3moe", qwen3 = s.arch == "qwen3" || moe, qwen2 = s.arch == "qwen2";
  const int64_t X = s.n_expert, FX = s.n_ff_exp;
  std::vector<ShapeTensor> t;
  if (s.llama3_factor != 0.0f) t.push_back({"rope_freqs.weight", {hd / 2}, Fill::values, llama3_rope_freqs(s)});
  t.push_back({"token_embd.weight", {E, V}, Fill::normal});
  for (int i = 0; i < s.n_layer; ++i) {
    auto n = [i](const char* x) { return fmt::format("blk.{}.{}", i, x); };
    t.push_back({n("attn_norm.weight"), {E}, Fill::ones});
    if (moe) {
      t.push_back({n("ffn_down_exps.weight"), {FX, E, X}, Fill::normal});
      t.push_back({n("ffn_gate_exps.weight"), {E, FX, X}, Fill::normal});
      t.push_back({n("ffn_up_exps.weight"), {E, FX, X}, Fill::normal});
      t.push_back({n("ffn_gate_inp.weight"), {E, X}, Fill::normal});
    } else {
      t.push_back({n("ffn_down.weight"), {F, E}, Fill::normal});
      t.push_back({n("ffn_gate.weight"), {E, F}, Fill::normal});
      t.push_back({n("ffn_up.weight"), {E, F}, Fill::normal});
    }
    t.push_back({n("ffn_norm.weight"), {E}, Fill::ones});
    if (qwen3) t.push_back({n("attn_k_norm.weight"), {hd}, Fill::ones});
    if (qwen2) t.push_back({n("attn_k.bias"), {kv}, Fill::bias});
    t.push_back({n("attn_k.weight"), {E, kv}, Fill::normal});
    t.push_back({n("attn_output.weight"), {q, E}, Fill::normal});
    if (qwen3) t.push_back({n("attn_q_norm.weight"), {hd}, Fill::ones});
    if (qwen2) t.push_back({n("attn_q.bias"), {q}, Fill::bias});
    t.push_back({n("attn_q.weight"), {E, q}, Fill::normal});
    if (qwen2) t.push_back({n("attn_v.bias"), {kv}, Fill::bias});
    t.push_back({n("attn_v.weight"), {E, kv}, Fill::normal});
  }
  t.push_back({"output_norm.weight", {E}, Fill::ones});
  if (!s.tied) t.push_back({"output.weight", {E, V}, Fill::normal});
  return t;
}

std::vector<float> llama3_rope_freqs(const ModelShape& s) {
  const int32_t hd = s.head_dim_or_default();
  const double pi = 3.14159265358979323846, orig = s.llama3_n_ctx_orig;
  const double low_wavelen = orig / s.llama3_low_freq, high_wavelen = orig / s.llama3_high_freq;
  std::vector<float> f;
  for (int32_t k = 0; k < hd / 2; ++k) {
    const double theta = 1.0 / std::pow(static_cast<double>(s.rope_freq_base), 2.0 * k / hd);
    const double wavelen = 2.0 * pi / theta;
    if (wavelen < high_wavelen) {
      f.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      f.push_back(s.llama3_factor);
    } else {
      const double smooth = (orig / wavelen - s.llama3_low_freq) / (s.llama3_high_freq - s.llama3_low_freq);
      f.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / s.llama3_factor + smooth)));
    }
  }
  return f;
}

std::string size_label(int64_t n) {
  double scaled;
  const char* suffix;
  if (n > 1e12) scaled = static_cast<double>(n) * 1e-12, suffix = "T";
  else if (n > 1e9) scaled = static_cast<double>(n) * 1e-9, suffix = "B";
  else if (n > 1e6) scaled = static_cast<double>(n) * 1e-6, suffix = "M";
  else scaled = static_cast<double>(n) * 1e-3, suffix = "K";
  // Python: max(min_digits - len(str(round(scaled)).lstrip('0')), 0) with min_digits = 2.
  std::string digits = std::to_string(static_cast<long long>(std::nearbyint(scaled)));
  digits.erase(0, digits.find_first_not_of('0') == std::string::npos ? digits.size() : digits.find_first_not_of('0'));
  const int fix = std::max(2 - static_cast<int>(digits.size()), 0);
  return fmt::format("{:.{}f}{}", scaled, fix, suffix);
}

}  // namespace minfer::quantize
