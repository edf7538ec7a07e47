// Context: owns the tensors of one model or one graph, and the view builders.
//
// Tensors live as long as their context and never move (pointers stay valid). Creating a tensor
// allocates no data: leaves get storage from allocate_tensors() (tensor/buffer.h) or point into
// a mapped file; nodes get storage from the graph allocator (tensor/graph_alloc.h).
#pragma once

#include <array>
#include <deque>
#include <initializer_list>
#include <string_view>

#include "tensor/tensor.h"

namespace minfer {

class Context {
 public:
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&&) = default;
  Context& operator=(Context&&) = default;

  /// A new contiguous leaf of `type` with up to 4 dims (missing dims are 1). Throws
  /// std::invalid_argument for more than 4 dims, negative sizes, or ne[0] not a multiple of the
  /// dtype's block size.
  Tensor* new_tensor(DType type, std::initializer_list<int64_t> ne, std::string_view name = {});
  Tensor* new_tensor(DType type, const std::array<int64_t, kMaxDims>& ne, std::string_view name = {});

  /// A new contiguous node computing `op` over `srcs` (op builders use this; see ops/).
  Tensor* new_node(Op op, DType type, const std::array<int64_t, kMaxDims>& ne,
                   std::initializer_list<Tensor*> srcs);

  /// A tensor that aliases `src`'s storage at byte `offset` with the given shape and strides;
  /// `op` is the view op recorded. Throws OpError when the view's byte span leaves `src`'s.
  Tensor* new_view(Op op, Tensor* src, DType type, const std::array<int64_t, kMaxDims>& ne,
                   const std::array<size_t, kMaxDims>& nb, size_t offset);

  size_t size() const { return tensors_.size(); }
  auto begin() { return tensors_.begin(); }
  auto end() { return tensors_.end(); }

 private:
  std::deque<Tensor> tensors_;
};

// ---- views (no copies; the result's view_src is the storage root) ----

/// Same bytes, new shape. `a` must be contiguous and the element count must match.
Tensor* reshape(Context& ctx, Tensor* a, std::initializer_list<int64_t> ne);

/// General strided view of `a`: shape `ne`, byte strides nb[1..3] (nb[0] is the element or block
/// size), starting `offset` bytes into `a`. Throws OpError when it reaches outside `a`.
Tensor* view(Context& ctx, Tensor* a, std::initializer_list<int64_t> ne,
             std::initializer_list<size_t> nb_rest, size_t offset);

/// Permutes axes with ggml's convention: axis i of `a` becomes axis ax[i] of the result.
Tensor* permute(Context& ctx, Tensor* a, int ax0, int ax1, int ax2, int ax3);

/// Swaps dims 0 and 1.
Tensor* transpose(Context& ctx, Tensor* a);

/// Elements [start, start + len) of dimension `dim`, all others whole. Throws OpError when out of
/// range, or when slicing dim 0 of a block dtype at a non-block boundary.
Tensor* slice(Context& ctx, Tensor* a, int dim, int64_t start, int64_t len);

/// If `a` and `b` are 2-D views of consecutive row ranges of the same contiguous storage (b's
/// first row directly follows a's last) with the same dtype and row length, returns a view
/// spanning both; otherwise nullptr. Models load concatenated weights this way (wq|wk|wv,
/// gate|up: Weights::get_concat_rows) so that one matmul reads them.
Tensor* adjacent_rows(Context& ctx, Tensor* a, Tensor* b);

}  // namespace minfer
