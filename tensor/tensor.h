// The tensor: one plain struct that is both a value and a graph node (the ggml design).
//
// Conventions used everywhere in minfer:
// - Dimension order: ne[0] is the innermost (fastest-varying) dimension. A matrix of M rows of
//   K elements has ne = [K, M]; a batch of N token vectors of width n_embd has ne = [n_embd, N].
// - Strides nb[] are in bytes. For a block dtype nb[0] is the block's byte size and nb[1] the row
//   size, so rows must hold a whole number of blocks. Contiguous: nb[0] = type_size,
//   nb[1] = row_size(ne[0]), nb[i] = nb[i-1] * ne[i-1].
// - Matmul: mul_mat(a, b) with a = [K, M] (weights, one row per output feature) and b = [K, N]
//   gives [M, N] in f32, i.e. out[n][m] = sum_k a[m][k] * b[n][k]; dims 2 and 3 broadcast.
// - Up to 4 dims; unused dims have ne = 1.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>

#include "tensor/dtype.h"
#include "tensor/op.h"

namespace minfer {

inline constexpr int kMaxDims = 4;
inline constexpr int kMaxSrc = 16;
inline constexpr int kMaxOpParams = 16;  // 32-bit words

class Buffer;

/// Tensor flags.
enum TensorFlag : uint32_t {
  kTensorInput = 1u << 0,   ///< filled by the caller before compute (token ids, positions)
  kTensorOutput = 1u << 1,  ///< read after compute: never reused by the allocator
  kTensorWeight = 1u << 2,  ///< a model parameter: lives in a weight buffer, not the arena
};

struct Tensor {
  DType type = DType::F32;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  ///< elements per dimension
  std::array<size_t, kMaxDims> nb{0, 0, 0, 0};   ///< byte stride per dimension

  Op op = Op::NONE;
  std::array<int32_t, kMaxOpParams> op_params{};  ///< op-specific, see the op's builder
  /// Sources. Kernels read the sources their op documents; any further non-null entries are
  /// ordering dependencies only (the node must run after them).
  std::array<Tensor*, kMaxSrc> src{};

  Tensor* view_src = nullptr;  ///< the tensor whose storage this one aliases (views, KV_STORE, CPY into)
  size_t view_offs = 0;        ///< byte offset into view_src's storage

  void* data = nullptr;      ///< host or device address, set by allocation
  Buffer* buffer = nullptr;  ///< the backend buffer that owns `data`
  /// The node's kernel workspace: Backend::workspace_bytes(*this) bytes that the graph allocator
  /// places in the arena next to the tensors (alive while this node computes only).
  void* work = nullptr;
  size_t work_bytes = 0;
  uint32_t flags = 0;
  std::string name;

  // ---- shape queries ----
  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  /// Number of rows: every dimension but the first.
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  /// Bytes spanned from the first to one past the last element (ggml_nbytes), valid for views.
  size_t nbytes() const;
  /// Bytes of one row of ne[0] elements.
  size_t row_size() const { return dtype_row_size(type, ne[0]); }
  int n_dims() const;  ///< index of the last dimension with ne > 1, plus one (at least 1)
  bool is_contiguous() const;
  /// Rows are contiguous (nb[0] is the element size) even if rows are strided.
  bool rows_contiguous() const;
  bool is_view() const { return view_src != nullptr; }
  bool has_flag(TensorFlag f) const { return (flags & f) != 0; }

  /// The tensor that owns the storage (follows view_src to the end).
  const Tensor* storage_root() const;
  Tensor* storage_root();

  // ---- op params ----
  template <typename T>
  T param(int i) const {
    static_assert(sizeof(T) == 4, "op params are 32-bit words");
    T v;
    std::memcpy(&v, &op_params.at(static_cast<size_t>(i)), 4);
    return v;
  }
  template <typename T>
  void set_param(int i, T v) {
    static_assert(sizeof(T) == 4, "op params are 32-bit words");
    std::memcpy(&op_params.at(static_cast<size_t>(i)), &v, 4);
  }

  /// Address of element (i0, i1, i2, i3)'s block start: data + sum(i * nb). For block dtypes
  /// i0 must be a multiple of the block size.
  void* ptr(int64_t i0 = 0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const;
};

/// Contiguous byte strides for `type` and `ne`. Throws std::invalid_argument when ne[0] is not a
/// multiple of the block size or any ne is negative.
std::array<size_t, kMaxDims> contiguous_strides(DType type, const std::array<int64_t, kMaxDims>& ne);

/// Human-readable "name [ne0, ne1, ne2, ne3] dtype" for error messages.
std::string describe(const Tensor& t);

/// True when a and b have the same ne.
bool same_shape(const Tensor& a, const Tensor& b);

/// True when b can be broadcast (tiled) onto a: every a.ne[i] is a multiple of b.ne[i].
bool can_repeat(const Tensor& b, const Tensor& a);

/// Error thrown for misuse of an op: wrong shapes, dtypes or arguments. The message names the op
/// and describes the operands.
class OpError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace minfer
