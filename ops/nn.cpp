// Builders for the neural-network ops: rms_norm, mul_mat, rope, soft_max, kv_store, attention.
#include <algorithm>
#include <cmath>
#include <string>

#include "ops/attention.h"
#include "ops/check.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/softmax.h"

namespace minfer::ops {
using detail::fail;
using detail::require_type;

Tensor* rms_norm(Context& ctx, Tensor* x, float eps, Tensor* weight) {
  require_type(Op::RMS_NORM, x, "x", {DType::F32, DType::F16});
  if (!(eps > 0.0f)) fail(Op::RMS_NORM, fmt::format("eps must be > 0, got {}", eps));
  if (weight) {
    require_type(Op::RMS_NORM, weight, "weight", {DType::F32, DType::F16});
    if (weight->nelements() != x->ne[0])
      fail(Op::RMS_NORM, fmt::format("weight {} must have ne0 = {} elements (x {})", describe(*weight), x->ne[0],
                                     describe(*x)));
  }
  Tensor* t = ctx.new_node(Op::RMS_NORM, DType::F32, x->ne, {x, weight});
  t->set_param(0, eps);
  return t;
}

Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b) {
  detail::require_src(Op::MUL_MAT, a, "a");
  require_type(Op::MUL_MAT, b, "b", {DType::F32, DType::F16});
  if (a->type == DType::I32 || !dtype_traits(a->type).supported || a->type == DType::Q8_K)
    fail(Op::MUL_MAT, fmt::format("weight dtype {} of {} is not supported", dtype_name(a->type), describe(*a)));
  if (a->ne[0] != b->ne[0])
    fail(Op::MUL_MAT, fmt::format("inner dims differ: a {} and b {}", describe(*a), describe(*b)));
  if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0)
    fail(Op::MUL_MAT, fmt::format("batch dims of a {} do not divide b {}", describe(*a), describe(*b)));
  if (!a->rows_contiguous()) fail(Op::MUL_MAT, "weight rows of " + describe(*a) + " must be contiguous");
  return ctx.new_node(Op::MUL_MAT, DType::F32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b});
}

void set_rope_params(Tensor& node, const RopeParams& p, int first) {
  node.set_param(first + 0, p.n_rot);
  node.set_param(first + 1, static_cast<int32_t>(p.mode));
  node.set_param(first + 2, p.freq_base);
  node.set_param(first + 3, p.freq_scale);
  node.set_param(first + 4, p.ext_factor);
  node.set_param(first + 5, p.attn_factor);
  node.set_param(first + 6, p.beta_fast);
  node.set_param(first + 7, p.beta_slow);
  node.set_param(first + 8, p.n_ctx_orig);
  static_assert(kRopeParamWords == 9);
}

RopeParams rope_params_of(const Tensor& node, int first) {
  RopeParams p;
  p.n_rot = node.param<int32_t>(first + 0);
  p.mode = static_cast<RopeMode>(node.param<int32_t>(first + 1));
  p.freq_base = node.param<float>(first + 2);
  p.freq_scale = node.param<float>(first + 3);
  p.ext_factor = node.param<float>(first + 4);
  p.attn_factor = node.param<float>(first + 5);
  p.beta_fast = node.param<float>(first + 6);
  p.beta_slow = node.param<float>(first + 7);
  p.n_ctx_orig = node.param<int32_t>(first + 8);
  return p;
}

double yarn_mscale(double factor) { return factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0; }

RopeCorrDims rope_corr_dims(const RopeParams& p) {
  if (p.ext_factor == 0.0f) return {};
  // The pair index whose wavelength fits `rotations` turns into the original context.
  const double pi = 3.14159265358979323846;
  auto corr_dim = [&](double rotations) {
    return p.n_rot * std::log(p.n_ctx_orig / (rotations * 2.0 * pi)) / (2.0 * std::log(static_cast<double>(p.freq_base)));
  };
  RopeCorrDims d;
  d.low = std::max(0.0, std::floor(corr_dim(p.beta_fast)));
  d.high = std::min(static_cast<double>(p.n_rot - 1), std::ceil(corr_dim(p.beta_slow)));
  return d;
}

std::string rope_params_error(const RopeParams& q, int64_t head_dim) {
  if (q.n_rot < 0 || q.n_rot % 2 != 0 || q.n_rot > head_dim)
    return fmt::format("n_rot {} must be even and <= head dim {}", q.n_rot, head_dim);
  if (q.mode != RopeMode::NORMAL && q.mode != RopeMode::NEOX)
    return fmt::format("unknown rope mode {}", static_cast<int>(q.mode));
  if (!(q.freq_base > 0.0f) || !std::isfinite(q.freq_base)) return fmt::format("freq_base must be > 0, got {}", q.freq_base);
  if (!(q.freq_scale > 0.0f) || !std::isfinite(q.freq_scale))
    return fmt::format("freq_scale must be > 0, got {}", q.freq_scale);
  if (!std::isfinite(q.attn_factor) || !std::isfinite(q.ext_factor))
    return fmt::format("attn_factor {} and ext_factor {} must be finite", q.attn_factor, q.ext_factor);
  if (q.ext_factor != 0.0f) {
    if (q.n_ctx_orig <= 0) return fmt::format("YaRN (ext_factor {}) needs n_ctx_orig > 0, got {}", q.ext_factor, q.n_ctx_orig);
    if (!(q.beta_fast > 0.0f) || !(q.beta_slow > 0.0f))
      return fmt::format("YaRN beta_fast {} and beta_slow {} must be > 0", q.beta_fast, q.beta_slow);
  }
  return {};
}

namespace detail {
void check_rope_params(Op op, const RopeParams& q, int64_t head_dim, const Tensor* freq_factors) {
  if (std::string e = rope_params_error(q, head_dim); !e.empty()) fail(op, e);
  if (freq_factors) {
    require_type(op, freq_factors, "freq_factors", {DType::F32});
    if (freq_factors->nelements() != q.n_rot / 2 || !freq_factors->is_contiguous())
      fail(op, fmt::format("freq_factors {} must be contiguous with n_rot/2 = {} elements", describe(*freq_factors),
                           q.n_rot / 2));
  }
}
}  // namespace detail

Tensor* rope(Context& ctx, Tensor* x, Tensor* pos, const RopeParams& p, Tensor* freq_factors) {
  require_type(Op::ROPE, x, "x", {DType::F32});
  require_type(Op::ROPE, pos, "pos", {DType::I32});
  RopeParams q = p;
  if (q.n_rot == 0) q.n_rot = static_cast<int32_t>(x->ne[0]);
  detail::check_rope_params(Op::ROPE, q, x->ne[0], freq_factors);
  if (pos->nelements() != x->ne[2])
    fail(Op::ROPE, fmt::format("pos {} must hold one position per token of x {}", describe(*pos), describe(*x)));
  if (x->ne[3] != 1) fail(Op::ROPE, "x " + describe(*x) + " must be 3-D [head_dim, n_head, n_tokens]");
  Tensor* t = ctx.new_node(Op::ROPE, DType::F32, x->ne, {x, pos, freq_factors});
  set_rope_params(*t, q);
  return t;
}

Tensor* soft_max(Context& ctx, Tensor* x, float scale, Tensor* pos) {
  require_type(Op::SOFT_MAX, x, "x", {DType::F32});
  if (pos) {
    require_type(Op::SOFT_MAX, pos, "pos", {DType::I32});
    if (pos->nelements() != x->ne[1])
      fail(Op::SOFT_MAX, fmt::format("pos {} must hold one position per row of x {}", describe(*pos), describe(*x)));
  }
  Tensor* t = ctx.new_node(Op::SOFT_MAX, DType::F32, x->ne, {x, pos});
  t->set_param(0, scale);
  return t;
}

Tensor* kv_store(Context& ctx, Tensor* cache, Tensor* x, Tensor* cells) {
  require_type(Op::KV_STORE, cache, "cache", {DType::F32, DType::F16, DType::Q8_0});
  require_type(Op::KV_STORE, x, "x", {DType::F32});
  require_type(Op::KV_STORE, cells, "cells", {DType::I32});
  if (!cache->is_contiguous()) fail(Op::KV_STORE, "cache " + describe(*cache) + " must be contiguous");
  if (x->ne[0] != cache->ne[0] || x->ne[1] != cache->ne[1] || x->ne[3] != 1 || cache->ne[3] != 1)
    fail(Op::KV_STORE, fmt::format("x {} does not match cache {} ([head_dim, n_head_kv, ...])", describe(*x),
                                   describe(*cache)));
  if (cells->nelements() != x->ne[2])
    fail(Op::KV_STORE, fmt::format("cells {} must hold one cell per token of x {}", describe(*cells), describe(*x)));
  Tensor* t = ctx.new_view(Op::VIEW, cache, cache->type, cache->ne, cache->nb, 0);
  t->op = Op::KV_STORE;
  t->src = {};
  t->src[0] = cache;
  t->src[1] = x;
  t->src[2] = cells;
  return t;
}

Tensor* attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* pos, Tensor* seq, Tensor* block_table,
                  int32_t block_size, float scale, AttentionImpl impl) {
  require_type(Op::ATTENTION, q, "q", {DType::F32});
  require_type(Op::ATTENTION, k, "k", {DType::F32, DType::F16, DType::Q8_0});
  require_type(Op::ATTENTION, v, "v", {DType::F32, DType::F16, DType::Q8_0});
  require_type(Op::ATTENTION, pos, "pos", {DType::I32});
  require_type(Op::ATTENTION, seq, "seq", {DType::I32});
  require_type(Op::ATTENTION, block_table, "block_table", {DType::I32});
  const int64_t n_head = q->ne[1], n_head_kv = k->ne[1];
  if (q->ne[0] != k->ne[0])
    fail(Op::ATTENTION, fmt::format("head dims differ: q {} k {}", describe(*q), describe(*k)));
  if (v->ne[1] != n_head_kv || v->ne[2] != k->ne[2])
    fail(Op::ATTENTION, fmt::format("k {} and v {} differ in heads or cells", describe(*k), describe(*v)));
  if (n_head_kv == 0 || n_head % n_head_kv != 0)
    fail(Op::ATTENTION, fmt::format("n_head {} is not a multiple of n_head_kv {}", n_head, n_head_kv));
  if (pos->nelements() != q->ne[2] || seq->nelements() != q->ne[2])
    fail(Op::ATTENTION, fmt::format("pos {} and seq {} must hold one entry per query of q {}", describe(*pos),
                                    describe(*seq), describe(*q)));
  if (q->ne[3] != 1 || k->ne[3] != 1 || v->ne[3] != 1) fail(Op::ATTENTION, "q, k, v must be 3-D");
  if (!k->rows_contiguous() || !v->rows_contiguous()) fail(Op::ATTENTION, "k and v rows must be contiguous");
  if (block_size <= 0 || k->ne[2] % block_size != 0)
    fail(Op::ATTENTION, fmt::format("block size {} must be positive and divide the cache's {} cells", block_size, k->ne[2]));
  if (block_table->ne[2] != 1 || block_table->ne[3] != 1 || !block_table->is_contiguous())
    fail(Op::ATTENTION, "block_table " + describe(*block_table) + " must be a contiguous 2-D [max_blocks, n_rows]");
  Tensor* t = ctx.new_node(Op::ATTENTION, DType::F32, {v->ne[0], n_head, q->ne[2], 1}, {q, k, v, pos, seq, block_table});
  t->set_param(0, scale);
  t->set_param(1, static_cast<int32_t>(impl));
  t->set_param(2, block_size);
  return t;
}

}  // namespace minfer::ops
