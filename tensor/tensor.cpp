#include "tensor/tensor.h"

#include <fmt/format.h>

#include "tensor/op.h"

namespace minfer {

size_t Tensor::nbytes() const {
  for (int i = 0; i < kMaxDims; ++i)
    if (ne[i] == 0) return 0;
  const int64_t bs = dtype_block_size(type);
  // The last element's block start plus one block, as ggml_nbytes computes it.
  size_t n = dtype_type_size(type);
  if (bs == 1) {
    for (int i = 0; i < kMaxDims; ++i) n += static_cast<size_t>(ne[i] - 1) * nb[i];
  } else {
    n = static_cast<size_t>(ne[0] / bs) * nb[0];
    for (int i = 1; i < kMaxDims; ++i) n += static_cast<size_t>(ne[i] - 1) * nb[i];
  }
  return n;
}

int Tensor::n_dims() const {
  for (int i = kMaxDims - 1; i >= 1; --i)
    if (ne[i] > 1) return i + 1;
  return 1;
}

bool Tensor::is_contiguous() const {
  const auto c = contiguous_strides(type, ne);
  for (int i = 0; i < kMaxDims; ++i)
    if (ne[i] > 1 && nb[i] != c[i]) return false;
  return true;
}

bool Tensor::rows_contiguous() const { return nb[0] == dtype_type_size(type); }

const Tensor* Tensor::storage_root() const {
  const Tensor* t = this;
  while (t->view_src) t = t->view_src;
  return t;
}

Tensor* Tensor::storage_root() {
  Tensor* t = this;
  while (t->view_src) t = t->view_src;
  return t;
}

void* Tensor::ptr(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
  const int64_t bs = dtype_block_size(type);
  return static_cast<char*>(data) + (i0 / bs) * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
}

std::array<size_t, kMaxDims> contiguous_strides(DType type, const std::array<int64_t, kMaxDims>& ne) {
  for (int i = 0; i < kMaxDims; ++i)
    if (ne[i] < 0) throw std::invalid_argument(fmt::format("negative dimension ne[{}] = {}", i, ne[i]));
  std::array<size_t, kMaxDims> nb{};
  nb[0] = dtype_type_size(type);
  nb[1] = dtype_row_size(type, ne[0]);
  for (int i = 2; i < kMaxDims; ++i) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
  return nb;
}

std::string describe(const Tensor& t) {
  return fmt::format("{}[{}, {}, {}, {}] {}{}", t.name.empty() ? "" : "'" + t.name + "' ", t.ne[0],
                     t.ne[1], t.ne[2], t.ne[3], dtype_name(t.type),
                     t.is_contiguous() ? "" : " (strided)");
}

bool same_shape(const Tensor& a, const Tensor& b) { return a.ne == b.ne; }

bool can_repeat(const Tensor& b, const Tensor& a) {
  for (int i = 0; i < kMaxDims; ++i)
    if (b.ne[i] == 0 || a.ne[i] % b.ne[i] != 0) return false;
  return true;
}

std::string_view op_name(Op op) {
  switch (op) {
    case Op::NONE: return "NONE";
    case Op::VIEW: return "VIEW";
    case Op::RESHAPE: return "RESHAPE";
    case Op::PERMUTE: return "PERMUTE";
    case Op::TRANSPOSE: return "TRANSPOSE";
    case Op::CPY: return "CPY";
    case Op::GET_ROWS: return "GET_ROWS";
    case Op::ADD: return "ADD";
    case Op::MUL: return "MUL";
    case Op::SCALE: return "SCALE";
    case Op::RMS_NORM: return "RMS_NORM";
    case Op::MUL_MAT: return "MUL_MAT";
    case Op::ROPE: return "ROPE";
    case Op::SOFT_MAX: return "SOFT_MAX";
    case Op::SILU: return "SILU";
    case Op::SWIGLU: return "SWIGLU";
    case Op::ATTENTION: return "ATTENTION";
    case Op::KV_STORE: return "KV_STORE";
    case Op::CONCAT: return "CONCAT";
    case Op::ARGMAX: return "ARGMAX";
    case Op::TOP_K: return "TOP_K";
    case Op::MUL_MAT_ID: return "MUL_MAT_ID";
    case Op::ALL_REDUCE: return "ALL_REDUCE";
    case Op::ALL_GATHER: return "ALL_GATHER";
    case Op::FFN_SWIGLU: return "FFN_SWIGLU";
    case Op::QKV: return "QKV";
    case Op::MUL_MAT_ADD: return "MUL_MAT_ADD";
    case Op::RMS_NORM_Q8_1: return "RMS_NORM_Q8_1";
    case Op::MOE_SUM: return "MOE_SUM";
    case Op::COUNT: break;
  }
  return "?";
}

}  // namespace minfer
