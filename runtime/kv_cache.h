// KvCache: per-layer key and value caches on one backend.
//
// Layer l holds k(l), v(l): [head_dim, n_head_kv, n_ctx] of F16 (default), F32 or Q8_0. Row p is
// the key/value of the token at position p; the forward pass writes rows at the batch's
// positions (ops::kv_store) and attention reads rows 0..pos. n_past() is the number of valid
// rows; rolling back (speculative decoding) just lowers it: stale rows are overwritten before
// they are ever read again.
#pragma once

#include <memory>
#include <vector>

#include "tensor/backend.h"
#include "tensor/context.h"

namespace minfer {

struct KvCacheParams {
  int32_t n_ctx = 0;
  DType type = DType::F16;
};

class KvCache {
 public:
  /// Allocates the caches. Throws std::invalid_argument for n_ctx <= 0 or an unsupported dtype
  /// (F16, F32, Q8_0; Q8_0 needs head_dim % 32 == 0) and OutOfMemoryError when the backend cannot
  /// hold them (the message gives the size and suggests a smaller -c).
  KvCache(Backend& backend, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v,
          const KvCacheParams& p);

  Tensor* k(int layer) const { return k_.at(static_cast<size_t>(layer)); }
  Tensor* v(int layer) const { return v_.at(static_cast<size_t>(layer)); }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_past() const { return n_past_; }
  /// Sets the number of valid rows (after a forward pass, or to roll back). 0 <= n <= n_ctx.
  void set_n_past(int32_t n);
  size_t bytes() const { return bytes_; }
  DType type() const { return type_; }

  /// Bytes the caches would take, for sizing n_ctx against a budget.
  static size_t bytes_needed(int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v,
                             int32_t n_ctx, DType type);

 private:
  Context ctx_;
  std::unique_ptr<Buffer> buffer_;
  std::vector<Tensor*> k_, v_;
  int32_t n_ctx_ = 0, n_past_ = 0;
  size_t bytes_ = 0;
  DType type_;
};

}  // namespace minfer
