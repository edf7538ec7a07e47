#include "quantize/quantize_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <stdexcept>

#include "gguf/gguf.h"
#include "quantize/parallel.h"
#include "tensor/quants.h"

namespace minfer::quantize {
namespace {

// GGML_QNT_VERSION: the block-layout version of the quantized types.
constexpr uint32_t kQuantizationVersion = 2;

int64_t n_rows(const gguf::TensorInfo& t) { return t.ne[1] * t.ne[2] * t.ne[3]; }

bool is_float_or_block(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || dtype_is_quantized(t); }

}  // namespace

std::vector<TensorDesc> tensor_descs(const gguf::File& f) {
  std::vector<TensorDesc> out;
  out.reserve(f.n_tensors());
  for (const auto& t : f.tensors()) {
    TensorDesc d;
    d.name = t.name;
    d.type = t.type;
    std::copy(std::begin(t.ne), std::end(t.ne), d.ne);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<TensorPlan> plan_file(const gguf::File& f, const QuantTarget& target) {
  const auto descs = tensor_descs(f);
  return plan_types(target, ModelInfo::from_gguf(f), descs);
}

Summary quantize_file(const std::filesystem::path& in, const std::filesystem::path& out,
                      const QuantizeParams& params, const TensorCallback& on_tensor) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!std::filesystem::exists(in)) throw gguf::Error(fmt::format("input file '{}' does not exist", in.string()));
  const gguf::File src(in);
  if (src.get_u32_or("split.count", 1) > 1)
    throw std::invalid_argument(fmt::format("{}: split GGUF files are not supported (merge them first)", src.name()));

  const auto descs = tensor_descs(src);
  const auto plan = plan_types(params.target, ModelInfo::from_gguf(src), descs);

  // Refuse early (before any output exists) what llama-quantize refuses.
  for (size_t i = 0; i < descs.size(); ++i) {
    const DType from = descs[i].type, to = plan[i].type;
    if (from == to) continue;
    if (!is_float_or_block(from))
      throw std::invalid_argument(fmt::format("tensor {}: cannot convert dtype {}", descs[i].name, dtype_name(from)));
    if (dtype_is_quantized(from) && !params.allow_requantize)
      throw std::invalid_argument(fmt::format(
          "tensor {} is already quantized ({}); requantizing loses quality and is disabled "
          "(pass --allow-requantize to do it anyway)",
          descs[i].name, dtype_name(from)));
  }

  std::vector<size_t> order(descs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return llama_tensor_less(descs[a].name, descs[b].name); });

  gguf::Writer w;
  w.copy_kvs(src);
  // Removed first so they move to the end, as ggml's gguf_set_val_* does for llama-quantize.
  w.remove("general.quantization_version");
  w.remove("general.file_type");
  w.set_u32("general.quantization_version", kQuantizationVersion);
  w.set_u32("general.file_type", static_cast<uint32_t>(params.target.ftype));
  for (const char* k : {"split.no", "split.count", "split.tensors.count"}) w.remove(k);

  Summary sum;
  sum.n_tensors = descs.size();
  for (const auto& t : src.tensors()) sum.n_elements += t.nelements();
  for (const auto& p : plan) sum.n_fallback += p.fallback ? 1 : 0;

  ThreadPool pool(params.n_threads);
  int64_t elements_done = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const gguf::TensorInfo& t = src.tensors()[i];
    const DType to = plan[i].type;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    const size_t bytes_out = dtype_nbytes(to, t.nelements());
    sum.bytes_in += t.nbytes;
    sum.bytes_out += bytes_out;
    w.add_tensor_streamed(t.name, to, ne, [&, i, k, to, bytes_out, ne](const gguf::Writer::Emit& emit) {
      const gguf::TensorInfo& ti = src.tensors()[i];
      if (ti.type == to) {
        emit(ti.data, ti.nbytes);
      } else {
        const int64_t n_per_row = ti.ne[0];
        const size_t in_row = dtype_row_size(ti.type, n_per_row);
        const size_t out_row = dtype_row_size(to, n_per_row);
        const DType from = ti.type;
        produce_rows(pool, n_rows(ti), out_row, n_per_row,
                     [&](int64_t r0, int64_t nr, uint8_t* dst) {
                       thread_local std::vector<float> f32;
                       if (from != DType::F32) f32.resize(static_cast<size_t>(n_per_row));
                       for (int64_t r = r0; r < r0 + nr; ++r) {
                         const uint8_t* row = ti.data + static_cast<size_t>(r) * in_row;
                         const float* x = reinterpret_cast<const float*>(row);
                         if (from != DType::F32) {
                           dequantize_row(from, row, f32.data(), n_per_row);
                           x = f32.data();
                         }
                         try {
                           quantize_row(to, x, dst + static_cast<size_t>(r - r0) * out_row, n_per_row);
                         } catch (const std::exception& e) {
                           throw std::runtime_error(fmt::format("tensor {} row {}: {}", ti.name, r, e.what()));
                         }
                       }
                     },
                     emit);
      }
      elements_done += ti.nelements();
      if (on_tensor) {
        TensorReport r;
        r.index = k;
        r.count = order.size();
        r.name = ti.name;
        r.ne = ne;
        r.from = ti.type;
        r.to = to;
        r.fallback = plan[i].fallback;
        r.bytes_in = ti.nbytes;
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
