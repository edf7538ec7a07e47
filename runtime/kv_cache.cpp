#include "runtime/kv_cache.h"

#include <fmt/format.h>

namespace minfer {

size_t KvCache::bytes_needed(int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx,
                             DType type) {
  const size_t per_pos = dtype_row_size(type, head_dim) * static_cast<size_t>(n_head_kv) +
                         dtype_row_size(type, head_dim_v) * static_cast<size_t>(n_head_kv);
  return per_pos * static_cast<size_t>(n_ctx) * static_cast<size_t>(n_layer);
}

KvCache::KvCache(Backend& backend, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v,
                 const KvCacheParams& p)
    : n_ctx_(p.n_ctx), type_(p.type) {
  if (p.n_ctx <= 0) throw std::invalid_argument(fmt::format("KV cache: n_ctx must be positive, got {}", p.n_ctx));
  if (p.type != DType::F16 && p.type != DType::F32 && p.type != DType::Q8_0)
    throw std::invalid_argument(fmt::format("KV cache: dtype {} is not supported (f16, f32, q8_0)", dtype_name(p.type)));
  if (p.type == DType::Q8_0 && (head_dim % 32 != 0 || head_dim_v % 32 != 0))
    throw std::invalid_argument(fmt::format("KV cache: q8_0 needs head_dim % 32 == 0, got {}", head_dim));
  for (int l = 0; l < n_layer; ++l) {
    k_.push_back(ctx_.new_tensor(p.type, {head_dim, n_head_kv, p.n_ctx}, fmt::format("cache_k_l{}", l)));
    v_.push_back(ctx_.new_tensor(p.type, {head_dim_v, n_head_kv, p.n_ctx}, fmt::format("cache_v_l{}", l)));
  }
  bytes_ = bytes_needed(n_layer, n_head_kv, head_dim, head_dim_v, p.n_ctx, p.type);
  try {
    buffer_ = allocate_tensors(ctx_, backend);
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(fmt::format("KV cache of {} positions needs {:.1f} MiB on {}: {} (use a smaller -c)", p.n_ctx,
                                       bytes_ / 1048576.0, backend.name(), e.what()));
  }
}

void KvCache::set_n_past(int32_t n) {
  if (n < 0 || n > n_ctx_) throw std::out_of_range(fmt::format("KV cache: n_past {} outside [0, {}]", n, n_ctx_));
  n_past_ = n;
}

}  // namespace minfer
