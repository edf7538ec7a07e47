#include "ops/fused.h"

#include "ops/check.h"

namespace minfer::ops {
using detail::fail;
using detail::require_type;

Tensor* adjacent_rows(Context& ctx, Tensor* a, Tensor* b) {
  if (!a || !b || !a->view_src || a->view_src != b->view_src) return nullptr;
  if (a->type != b->type || a->ne[0] != b->ne[0] || !a->is_contiguous() || !b->is_contiguous()) return nullptr;
  if (a->ne[2] != 1 || a->ne[3] != 1 || b->ne[2] != 1 || b->ne[3] != 1) return nullptr;
  Tensor* root = a->view_src;
  if (!root->is_contiguous() || root->ne[0] != a->ne[0]) return nullptr;
  if (b->view_offs != a->view_offs + a->nbytes()) return nullptr;
  return ctx.new_view(Op::VIEW, root, a->type, {a->ne[0], a->ne[1] + b->ne[1], 1, 1}, a->nb, a->view_offs);
}

Tensor* ffn_swiglu(Context& ctx, Tensor* x, Tensor* w_gate, Tensor* w_up, Tensor* w_down) {
  const Op op = Op::FFN_SWIGLU;
  require_type(op, x, "x", {DType::F32});
  detail::require_src(op, w_gate, "w_gate");
  detail::require_src(op, w_up, "w_up");
  detail::require_src(op, w_down, "w_down");
  if (w_gate->ne[0] != x->ne[0] || w_up->ne[0] != x->ne[0])
    fail(op, fmt::format("w_gate {} / w_up {} must have ne0 = n_embd of x {}", describe(*w_gate), describe(*w_up),
                         describe(*x)));
  if (w_gate->ne[1] != w_up->ne[1] || w_down->ne[0] != w_gate->ne[1])
    fail(op, fmt::format("n_ff mismatch: w_gate {} w_up {} w_down {}", describe(*w_gate), describe(*w_up),
                         describe(*w_down)));
  if (x->ne[2] != 1 || x->ne[3] != 1) fail(op, "x " + describe(*x) + " must be 2-D [n_embd, n_tokens]");
  return ctx.new_node(op, DType::F32, {w_down->ne[1], x->ne[1], 1, 1}, {x, w_gate, w_up, w_down});
}

Tensor* qkv(Context& ctx, Tensor* x, const QkvWeights& w, Tensor* pos, Tensor* cells, Tensor* k_cache,
            Tensor* v_cache, const QkvParams& p) {
  const Op op = Op::QKV;
  require_type(op, x, "x", {DType::F32});
  require_type(op, pos, "pos", {DType::I32});
  require_type(op, cells, "cells", {DType::I32});
  detail::require_src(op, w.wq, "wq");
  detail::require_src(op, w.wk, "wk");
  detail::require_src(op, w.wv, "wv");
  require_type(op, k_cache, "k_cache", {DType::F32, DType::F16, DType::Q8_0});
  require_type(op, v_cache, "v_cache", {DType::F32, DType::F16, DType::Q8_0});
  if (p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.n_head % p.n_head_kv != 0)
    fail(op, fmt::format("bad heads: n_head {} n_head_kv {} head_dim {}", p.n_head, p.n_head_kv, p.head_dim));
  const int64_t n_embd = x->ne[0], hd = p.head_dim;
  auto check_w = [&](Tensor* t, const char* role, int64_t rows) {
    if (t->ne[0] != n_embd || t->ne[1] != rows || t->ne[2] != 1)
      fail(op, fmt::format("{} {} must be [{}, {}]", role, describe(*t), n_embd, rows));
  };
  check_w(w.wq, "wq", p.n_head * hd);
  check_w(w.wk, "wk", p.n_head_kv * hd);
  check_w(w.wv, "wv", p.n_head_kv * hd);
  auto check_b = [&](Tensor* t, const char* role, int64_t n) {
    if (t && t->nelements() != n) fail(op, fmt::format("{} {} must have {} elements", role, describe(*t), n));
  };
  check_b(w.bq, "bq", p.n_head * hd);
  check_b(w.bk, "bk", p.n_head_kv * hd);
  check_b(w.bv, "bv", p.n_head_kv * hd);
  check_b(w.q_norm, "q_norm", hd);
  check_b(w.k_norm, "k_norm", hd);
  if ((w.q_norm == nullptr) != (w.k_norm == nullptr)) fail(op, "q_norm and k_norm come together");
  for (Tensor* c : {k_cache, v_cache})
    if (c->ne[0] != hd || c->ne[1] != p.n_head_kv)
      fail(op, fmt::format("cache {} must be [{}, {}, n_ctx]", describe(*c), hd, p.n_head_kv));
  if (x->ne[2] != 1 || x->ne[3] != 1) fail(op, "x " + describe(*x) + " must be 2-D [n_embd, n_tokens]");
  if (pos->nelements() != x->ne[1] || cells->nelements() != x->ne[1])
    fail(op, fmt::format("pos {} and cells {} must hold one entry per token of x {}", describe(*pos), describe(*cells),
                         describe(*x)));
  RopeParams rp = p.rope;
  if (rp.n_rot == 0) rp.n_rot = p.head_dim;
  detail::check_rope_params(op, rp, hd, w.rope_freqs);
  Tensor* t = ctx.new_node(op, DType::F32, {hd, p.n_head, x->ne[1], 1},
                           {x, w.wq, w.wk, w.wv, w.bq, w.bk, w.bv, w.q_norm, w.k_norm, pos, k_cache, v_cache, cells,
                            w.rope_freqs});
  t->set_param(0, p.n_head);
  t->set_param(1, p.n_head_kv);
  t->set_param(2, p.head_dim);
  t->set_param(3, p.norm_eps);
  set_rope_params(*t, rp, 4);  // words 4 .. 4 + kRopeParamWords
  return t;
}

}  // namespace minfer::ops
