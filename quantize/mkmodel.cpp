#include "quantize/mkmodel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "gguf/gguf.h"
#include "quantize/parallel.h"
#include "quantize/random.h"
#include "quantize/recipe.h"
#include "quantize/vocab_kv.h"
#include "tensor/quants.h"

namespace minfer::quantize {
namespace {

constexpr uint32_t kQuantizationVersion = 2;

void write_hparams(gguf::Writer& w, const ModelShape& s, const QuantTarget& target) {
  const std::string& a = s.arch;
  auto key = [&](const char* k) { return a + "." + k; };
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  w.set_string("general.name", (s.display_name.empty() ? s.name : s.display_name) + " (random weights)");
  w.set_string("general.size_label", size_label(s.n_params()));
  w.set_u32(key("block_count"), static_cast<uint32_t>(s.n_layer));
  w.set_u32(key("context_length"), static_cast<uint32_t>(s.n_ctx_train));
  w.set_u32(key("embedding_length"), static_cast<uint32_t>(s.n_embd));
  w.set_u32(key("feed_forward_length"), static_cast<uint32_t>(s.n_ff));
  w.set_u32(key("attention.head_count"), static_cast<uint32_t>(s.n_head));
  w.set_u32(key("attention.head_count_kv"), static_cast<uint32_t>(s.n_head_kv));
  w.set_f32(key("rope.freq_base"), s.rope_freq_base);
  w.set_f32(key("attention.layer_norm_rms_epsilon"), s.rms_eps);
  const bool moe = s.arch == "qwen3moe";
  if (moe) {
    w.set_u32(key("expert_count"), static_cast<uint32_t>(s.n_expert));
    w.set_u32(key("expert_used_count"), static_cast<uint32_t>(s.n_expert_used));
  }
  // The Qwen3 converter writes head_dim from config.json; Qwen2 configs have none, so a custom
  // head_dim there needs the keys too or readers would assume n_embd / n_head.
  const int32_t hd = s.head_dim_or_default();
  if (s.arch == "qwen3" || moe || hd != s.n_embd / s.n_head) {
    w.set_u32(key("attention.key_length"), static_cast<uint32_t>(hd));
    w.set_u32(key("attention.value_length"), static_cast<uint32_t>(hd));
  }
  w.set_u32("general.file_type", static_cast<uint32_t>(target.ftype));
  if (s.arch == "llama") {  // LlamaModel.set_gguf_parameters adds these two
    w.set_u32(key("vocab_size"), static_cast<uint32_t>(s.n_vocab));
    w.set_u32(key("rope.dimension_count"), static_cast<uint32_t>(hd));
  }
  if (moe) w.set_u32(key("expert_feed_forward_length"), static_cast<uint32_t>(s.n_ff_exp));
  w.set_u32("general.quantization_version", kQuantizationVersion);
}

}  // namespace

int64_t row_block_for(const QuantTarget& t) {
  const bool is_float = t.ftype == FileType::ALL_F32 || t.ftype == FileType::MOSTLY_F16 || t.ftype == FileType::MOSTLY_BF16;
  return is_float ? 1 : 32;
}

Summary make_model(const MakeModelParams& p, const std::filesystem::path& out, const TensorCallback& on_tensor) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelShape& s = p.shape;
  s.validate(row_block_for(p.target));
  if (!(p.stddev > 0) || !std::isfinite(p.stddev))
    throw std::invalid_argument(fmt::format("stddev {} must be positive and finite", p.stddev));

  gguf::Writer w;
  write_hparams(w, s, p.target);
  std::optional<gguf::File> vocab_file;
  if (!p.vocab.empty()) {
    if (!std::filesystem::exists(p.vocab))
      throw gguf::Error(fmt::format("vocab file '{}' does not exist", p.vocab.string()));
    vocab_file.emplace(p.vocab);
    copy_vocab(w, *vocab_file, s.n_vocab);
  } else {
    write_synthetic_vocab(w, s.n_vocab);
  }

  const std::vector<ShapeTensor> tensors = shape_tensors(s);
  std::vector<TensorDesc> descs(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    descs[i].name = tensors[i].name;
    descs[i].type = DType::F32;
    for (size_t d = 0; d < tensors[i].ne.size(); ++d) descs[i].ne[d] = tensors[i].ne[d];
  }
  ModelInfo info;
  info.arch = s.arch;
  info.n_layer = s.n_layer;
  info.n_head = s.n_head;
  info.n_head_kv = s.n_head_kv;
  info.n_expert = s.n_expert;  // the mixes treat MoE models differently (e.g. attn_v / attn_k at 8 experts)
  const std::vector<TensorPlan> plan = plan_types(p.target, info, descs);

  Summary sum;
  sum.n_tensors = tensors.size();
  for (const auto& d : descs) sum.n_elements += d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3];
  for (const auto& pl : plan) sum.n_fallback += pl.fallback ? 1 : 0;

  ThreadPool pool(p.n_threads);
  int64_t elements_done = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ShapeTensor& t = tensors[i];
    const DType to = plan[i].type;
    const int64_t n_per_row = t.ne[0];
    const int64_t n_elem = descs[i].ne[0] * descs[i].ne[1] * descs[i].ne[2] * descs[i].ne[3];
    const int64_t rows = n_elem / n_per_row;
    const size_t bytes_out = dtype_nbytes(to, n_elem);
    sum.bytes_in += static_cast<size_t>(n_elem) * sizeof(float);
    sum.bytes_out += bytes_out;
    w.add_tensor_streamed(t.name, to, t.ne, [&, i, to, n_per_row, rows, n_elem, bytes_out](const gguf::Writer::Emit& emit) {
      const ShapeTensor& ti = tensors[i];
      const size_t out_row = dtype_row_size(to, n_per_row);
      produce_rows(pool, rows, out_row, n_per_row,
                   [&](int64_t r0, int64_t nr, uint8_t* dst) {
                     thread_local std::vector<float> x;
                     x.resize(static_cast<size_t>(n_per_row));
                     for (int64_t r = r0; r < r0 + nr; ++r) {
                       if (ti.fill == Fill::ones) std::fill(x.begin(), x.end(), 1.0f);
                       else if (ti.fill == Fill::values)
                         std::copy_n(ti.values.begin() + r * n_per_row, n_per_row, x.begin());
                       else fill_normal(x.data(), n_per_row, p.stddev, row_stream_seed(p.seed, ti.name, r));
                       quantize_row(to, x.data(), dst + static_cast<size_t>(r - r0) * out_row, n_per_row);
                     }
                   },
                   emit);
      elements_done += n_elem;
      if (on_tensor) {
        TensorReport r;
        r.index = i;
        r.count = tensors.size();
        r.name = ti.name;
        r.ne = ti.ne;
        r.from = DType::F32;
        r.to = to;
        r.fallback = plan[i].fallback;
        r.bytes_in = static_cast<size_t>(n_elem) * sizeof(float);
        r.bytes_out = bytes_out;
        r.elements_done = elements_done;
        r.elements_total = sum.n_elements;
        on_tensor(r);
      }
    });
  }
  w.write(out);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace minfer::quantize
