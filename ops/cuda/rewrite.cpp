// The CUDA backend's graph rewrite: the only place fused ops come from. Models record basic ops;
// before allocation (Executor::allocate -> CudaBackend::rewrite) these patterns become the fused
// kernels of k_fused.cu, k_matmul.cu and k_norm.cu:
//
//   attention input   mul_mat(wq|wk|wv, x) (or three) -> views -> [add bias] -> [rms_norm q/k]
//                     -> rope q, k -> kv_store k, v -> attention        =>  QKV (-> attention)
//   SwiGLU MLP        mul_mat(wd, swiglu(mul_mat(wg|wu, x) views))      =>  FFN_SWIGLU
//   MoE experts       mul_mat_id(wd, ids, swiglu(mul_mat_id(wg, ids, x), mul_mat_id(wu, ids, x)))
//                     at MMVQ sizes                                     =>  FFN_SWIGLU + src[5] = ids
//   residual          add(r, mul_mat(w, x))  at matrix-vector sizes     =>  MUL_MAT_ADD
//                     add(r, FFN_SWIGLU)     at MMVQ sizes              =>  FFN_SWIGLU + src[4] = r
//   prequantization   rms_norm -> QKV / FFN_SWIGLU at MMVQ sizes        =>  RMS_NORM_Q8_1 -> ...
//                     rms_norm -> router mul_mat + experts' FFN_SWIGLU  =>  RMS_NORM_Q8_1 (+ f32 rows) -> both
//   MoE output        add chain over the k slot views of mul(y, w)      =>  MOE_SUM(y, w)
//                     ... w = softmax(get_rows(logits, ids))            =>  MOE_SUM(y, logits) + src[3] = ids
//                     add(r, MOE_SUM)                                   =>  MOE_SUM + src[2] = r
//
// A pattern is taken only when every inner node has no consumer outside it (its values are
// needed nowhere else) and the fused kernel supports the node (s_qkv, ...); otherwise the basic
// ops stay. The fused kernels compute the same arithmetic in the same order as the basic ones.
// Nodes that drop out of the pattern are left in the Context, unreachable from the outputs;
// rebuilding the graph forgets them. Already-fused graphs match nothing (idempotent).
#include <unordered_map>

#include "ops/cuda/kernels.cuh"
#include "ops/rope.h"

namespace minfer::cuda {
namespace {

class Uses {
 public:
  explicit Uses(const Graph& g) {
    for (const Tensor* t : g.nodes())
      for (const Tensor* s : t->src)
        if (s) ++n_[s];
    for (const Tensor* o : g.outputs()) n_[o] += 2;  // read by the caller: never folded away
  }
  int operator()(const Tensor* t) const {
    const auto it = n_.find(t);
    return it == n_.end() ? 0 : it->second;
  }
  bool single(const Tensor* t) const { return (*this)(t) == 1; }

 private:
  std::unordered_map<const Tensor*, int> n_;
};

bool is_f32_matrix(const Tensor* t) {
  return t && t->type == DType::F32 && t->is_contiguous() && t->ne[2] == 1 && t->ne[3] == 1;
}

using Sources = decltype(Tensor::src);

// Turns node n into `op` with sources `src` and `params` when the fused kernel supports the result
// (`ok`); otherwise n stays as it was. The one way a pattern retargets a node in place.
bool retarget(Tensor* n, Op op, const Sources& src, bool (*ok)(const Tensor&),
              const decltype(Tensor::op_params)& params = {}) {
  const Tensor before = *n;
  n->op = op;
  n->op_params = params;
  n->src = src;
  if (ok(*n)) return true;
  n->op = before.op;
  n->op_params = before.op_params;
  n->src = before.src;
  return false;
}

// One head group of the attention input: rows [row0, row0 + heads * hd) of the projection `mm`
// viewed as heads, with the optional bias and per-head RMSNorm applied to them.
struct Heads {
  Tensor* mm = nullptr;
  int64_t row0 = 0, heads = 0, hd = 0;
  Tensor* bias = nullptr;
  Tensor* norm = nullptr;
  float eps = 0;
};

// Walks back from `t` (what the rope rotates, or what the store stores): [RMS_NORM with a weight]
// [ADD of a reshaped bias leaf] VIEW of the f32 MUL_MAT output, each used only here.
bool parse_heads(const Uses& u, Tensor* t, bool allow_norm, Heads& h) {
  if (allow_norm && t->op == Op::RMS_NORM && t->src[1] && u.single(t)) {
    h.norm = t->src[1];
    h.eps = t->param<float>(0);
    t = t->src[0];
  }
  if (t->op == Op::ADD && u.single(t)) {
    const Tensor* b = t->src[1];
    if (!b || b->op != Op::RESHAPE || !b->src[0] || b->src[0]->op != Op::NONE || !b->src[0]->is_contiguous())
      return false;
    h.bias = b->src[0];
    t = t->src[0];
  }
  if (t->op != Op::VIEW || !u.single(t)) return false;
  Tensor* m = t->src[0];
  if (!m || m->op != Op::MUL_MAT || !is_f32_matrix(m)) return false;
  if (t->ne[2] != m->ne[1] || t->ne[3] != 1 || t->nb[1] != static_cast<size_t>(t->ne[0]) * 4 || t->nb[2] != m->nb[1] ||
      t->view_offs % 4 != 0)
    return false;
  h.mm = m;
  h.hd = t->ne[0];
  h.heads = t->ne[1];
  h.row0 = static_cast<int64_t>(t->view_offs / 4);
  if (h.row0 + h.hd * h.heads > m->ne[0]) return false;
  if (h.bias && h.bias->nelements() != h.hd * h.heads) return false;
  return true;
}

// ATTENTION(rope(q), kv_store(k cache, rope(k)), kv_store(v cache, v)): q/k/v, bias, norms, rope
// and both stores become one QKV node; the attention then reads the caches it wrote.
bool fuse_qkv(Context& ctx, const Uses& u, Tensor* attn) {
  Tensor *qr = attn->src[0], *ks = attn->src[1], *vs = attn->src[2];
  if (!qr || qr->op != Op::ROPE || !u.single(qr)) return false;
  if (!ks || ks->op != Op::KV_STORE || !u.single(ks) || !vs || vs->op != Op::KV_STORE || !u.single(vs)) return false;
  Tensor* kr = ks->src[1];
  if (!kr || kr->op != Op::ROPE || !u.single(kr)) return false;
  Tensor *pos = qr->src[1], *ff = qr->src[2], *cells = ks->src[2];
  if (kr->src[1] != pos || kr->src[2] != ff || vs->src[2] != cells || kr->op_params != qr->op_params) return false;
  Heads q, k, v;
  if (!parse_heads(u, qr->src[0], true, q) || !parse_heads(u, kr->src[0], true, k) ||
      !parse_heads(u, vs->src[1], false, v))
    return false;
  if (k.hd != q.hd || v.hd != q.hd || v.heads != k.heads) return false;
  if (q.norm && k.norm && q.eps != k.eps) return false;
  Tensor* x = q.mm->src[1];
  if (!is_f32_matrix(x)) return false;
  const int64_t nq = q.heads * q.hd, nk = k.heads * k.hd, nv = v.heads * v.hd;
  Tensor *wq, *wk, *wv;
  if (q.mm == k.mm && k.mm == v.mm) {  // one matmul over wq|wk|wv
    if (u(q.mm) != 3 || q.row0 != 0 || k.row0 != nq || v.row0 != nq + nk || q.mm->ne[0] != nq + nk + nv) return false;
    Tensor* w = q.mm->src[0];
    wq = slice(ctx, w, 1, 0, nq);
    wk = slice(ctx, w, 1, nq, nk);
    wv = slice(ctx, w, 1, nq + nk, nv);
  } else {
    for (const Heads* h : {&q, &k, &v})
      if (!u.single(h->mm) || h->row0 != 0 || h->mm->ne[0] != h->heads * h->hd || h->mm->src[1] != x) return false;
    if (q.mm == k.mm || k.mm == v.mm || q.mm == v.mm) return false;
    wq = q.mm->src[0];
    wk = k.mm->src[0];
    wv = v.mm->src[0];
  }
  Tensor* f = ctx.new_node(Op::QKV, DType::F32, {q.hd, q.heads, x->ne[1], 1},
                           {x, wq, wk, wv, q.bias, k.bias, v.bias, q.norm, k.norm, pos, ks->src[0], vs->src[0], cells, ff});
  f->set_param(0, static_cast<int32_t>(q.heads));
  f->set_param(1, static_cast<int32_t>(k.heads));
  f->set_param(2, static_cast<int32_t>(q.hd));
  f->set_param(3, q.norm ? q.eps : k.eps);
  ops::set_rope_params(*f, ops::rope_params_of(*qr), 4);
  if (!s_qkv(*f)) return false;
  attn->src[0] = f;
  attn->src[1] = ks->src[0];  // the caches, written by f, which the attention now follows
  attn->src[2] = vs->src[0];
  return true;
}

// MUL_MAT(wd, SWIGLU(gate, up)) with gate/up the two halves of one matmul (or two matmuls of the
// same x): the down matmul node becomes FFN_SWIGLU(x, wg, wu, wd).
bool fuse_ffn(Context& ctx, const Uses& u, Tensor* d) {
  Tensor* s = d->src[1];
  if (!s || s->op != Op::SWIGLU || !u.single(s) || !is_f32_matrix(d)) return false;
  Tensor *g = s->src[0], *up = s->src[1], *x, *wg, *wu;
  if (g->op == Op::VIEW && up->op == Op::VIEW && g->src[0] == up->src[0]) {
    Tensor* m = g->src[0];
    const int64_t n_ff = g->ne[0];
    if (!u.single(g) || !u.single(up) || !m || m->op != Op::MUL_MAT || u(m) != 2 || !is_f32_matrix(m)) return false;
    if (m->ne[0] != 2 * n_ff || up->ne[0] != n_ff || g->ne[1] != m->ne[1] || up->ne[1] != m->ne[1] ||
        g->nb[1] != m->nb[1] || up->nb[1] != m->nb[1] || g->view_offs != 0 ||
        up->view_offs != static_cast<size_t>(n_ff) * 4 || g->ne[2] != 1 || up->ne[2] != 1)
      return false;
    x = m->src[1];
    wg = slice(ctx, m->src[0], 1, 0, n_ff);
    wu = slice(ctx, m->src[0], 1, n_ff, n_ff);
  } else if (g->op == Op::MUL_MAT && up->op == Op::MUL_MAT && u.single(g) && u.single(up) && g->src[1] == up->src[1]) {
    x = g->src[1];
    wg = g->src[0];
    wu = up->src[0];
  } else {
    return false;
  }
  if (!is_f32_matrix(x)) return false;
  Sources src{};
  src[0] = x;
  src[1] = wg;
  src[2] = wu;
  src[3] = d->src[0];
  return retarget(d, Op::FFN_SWIGLU, src, s_ffn_swiglu);
}

// MUL_MAT_ID(wd, ids, SWIGLU(MUL_MAT_ID(wg, ids, x), MUL_MAT_ID(wu, ids, x))): the down node
// becomes FFN_SWIGLU(x, wg, wu, wd) with the ids in src[5] (decode sizes; s_ffn_swiglu decides).
bool fuse_ffn_id(const Uses& u, Tensor* d) {
  Tensor* s = d->src[2];
  if (!s || s->op != Op::SWIGLU || !u.single(s)) return false;
  Tensor *g = s->src[0], *up = s->src[1], *ids = d->src[1];
  if (!g || !up || g->op != Op::MUL_MAT_ID || up->op != Op::MUL_MAT_ID || !u.single(g) || !u.single(up)) return false;
  if (g->src[1] != ids || up->src[1] != ids || g->src[2] != up->src[2]) return false;
  Sources src{};
  src[0] = g->src[2];
  src[1] = g->src[0];
  src[2] = up->src[0];
  src[3] = d->src[0];
  src[5] = ids;
  return retarget(d, Op::FFN_SWIGLU, src, s_ffn_swiglu);
}

// ADD(r, t) where t (used only here) is a matrix-vector MUL_MAT, an MMVQ-sized FFN_SWIGLU or a
// MOE_SUM: the ADD node becomes t with r added in t's epilogue.
bool fuse_residual(const Uses& u, Tensor* add) {
  if (add->type != DType::F32 || !add->is_contiguous()) return false;
  for (int side : {1, 0}) {
    Tensor *t = add->src[side], *r = add->src[1 - side];
    if (!t || !r || t == r || !u.single(t)) continue;
    if (!same_shape(*t, *add) || !same_shape(*r, *add)) continue;
    Sources src = t->src;
    if (t->op == Op::MUL_MAT) {
      src[2] = r;
      if (retarget(add, Op::MUL_MAT_ADD, src, s_mul_mat_add, t->op_params)) return true;
    } else if (t->op == Op::FFN_SWIGLU && !t->src[4] && !t->src[5]) {
      src[4] = r;
      if (retarget(add, Op::FFN_SWIGLU, src, s_ffn_swiglu, t->op_params)) return true;
    } else if (t->op == Op::MOE_SUM && !t->src[2]) {
      src[2] = r;
      if (retarget(add, Op::MOE_SUM, src, s_moe_sum, t->op_params)) return true;
    }
  }
  return false;
}

// The slot j view of a MoE FFN's weighted expert outputs m = MUL(y [n, k, T], w [1, k, T]) (the
// toolkit's MoeFfn): [n, T] with m's token stride, at offset j * m->nb[1], used only here.
bool parse_slot(const Uses& u, const Tensor* v, const Tensor*& m, int64_t& j) {
  if (!v || v->op != Op::VIEW || !u.single(v)) return false;
  const Tensor* mm = v->src[0];
  if (!mm || mm->op != Op::MUL || mm->type != DType::F32 || !mm->is_contiguous() || mm->ne[3] != 1) return false;
  if (v->ne[0] != mm->ne[0] || v->ne[1] != mm->ne[2] || v->ne[2] != 1 || v->ne[3] != 1 || v->nb[1] != mm->nb[2] ||
      v->view_offs % mm->nb[1] != 0)
    return false;
  if (m && m != mm) return false;
  m = mm;
  j = static_cast<int64_t>(v->view_offs / mm->nb[1]);
  return true;
}

// The renormalized top-k weights of the toolkit's MoeFfn, w = RESHAPE(SOFT_MAX(RESHAPE(GET_ROWS(
// RESHAPE(logits [n_expert, T]), ids)))) with scale 1 and no positions, each node used only here:
// MOE_SUM can form them from the logits and ids itself (the same softmax arithmetic).
bool parse_routing(const Uses& u, Tensor* w, Tensor*& logits, Tensor*& ids) {
  auto through_reshape = [&](Tensor* t) { return t && t->op == Op::RESHAPE && u.single(t) ? t->src[0] : nullptr; };
  Tensor* sm = through_reshape(w);
  if (!sm || sm->op != Op::SOFT_MAX || !u.single(sm) || sm->src[1] || sm->param<float>(0) != 1.0f) return false;
  Tensor* gr = through_reshape(sm->src[0]);
  if (!gr || gr->op != Op::GET_ROWS || !u.single(gr) || !gr->src[1] || gr->src[1]->type != DType::I32) return false;
  Tensor* l3 = gr->src[0];  // [1, n_expert, T]: a row of one value per expert
  if (!l3 || l3->op != Op::RESHAPE || l3->ne[0] != 1 || !is_f32_matrix(l3->src[0])) return false;
  Tensor* l = l3->src[0];
  if (l->ne[0] != l3->ne[1] || l->ne[1] != l3->ne[2]) return false;
  logits = l;
  ids = gr->src[1];
  return true;
}

// ADD(ADD(... ADD(slot 0, slot 1) ..., slot k - 2), slot k - 1) over every slot of one MUL(y, w)
// whose values go nowhere else: the top ADD becomes MOE_SUM(y, w), which adds in the same order.
bool fuse_moe_sum(const Uses& u, Tensor* top) {
  const Tensor* m = nullptr;
  int64_t j = 0;
  if (top->op != Op::ADD || top->type != DType::F32 || !parse_slot(u, top->src[1], m, j)) return false;
  const int64_t k = m->ne[1];
  if (k < 2 || j != k - 1) return false;  // inner ADDs of a chain stop here
  const Tensor* cur = top;                 // adds slot s to the sum of slots 0 .. s - 1
  for (int64_t s = k - 2; s >= 1; --s) {
    cur = cur->src[0];
    if (cur->op != Op::ADD || cur->type != DType::F32 || !u.single(cur) || !parse_slot(u, cur->src[1], m, j) || j != s)
      return false;
  }
  if (!parse_slot(u, cur->src[0], m, j) || j != 0) return false;
  Tensor *y = m->src[0], *w = m->src[1];
  if (u(m) != k || !y || !w || !same_shape(*y, *m) || !y->is_contiguous()) return false;
  if (top->ne[0] != m->ne[0] || top->ne[1] != m->ne[2]) return false;
  Sources src{};
  src[0] = y;
  src[1] = w;
  if (parse_routing(u, w, src[1], src[3]) && retarget(top, Op::MOE_SUM, src, s_moe_sum)) return true;
  src[1] = w;
  src[3] = nullptr;
  return retarget(top, Op::MOE_SUM, src, s_moe_sum);
}

// RMS_NORM whose only consumer is QKV / FFN_SWIGLU activations with every projection weight on
// the MMVQ path: the norm writes the q8_1 planes those matmuls read, never the f32 rows.
bool fuse_prequant(Context& ctx, const Uses& u, Tensor* c) {
  Tensor* r = c->src[0];
  if (!r || r->op != Op::RMS_NORM || !u.single(r)) return false;
  if (!is_f32_matrix(r) || r->ne[0] % 32 != 0) return false;
  const int64_t n = r->ne[0], rows = r->ne[1];
  const int last = c->op == Op::QKV ? 3 : 2;
  for (int i = 1; i <= last; ++i)
    if (!matmul_is_mmvq(*c->src[i], rows)) return false;
  const auto bytes = static_cast<int64_t>(q8_plane_bytes(rows, n));
  Tensor* p = ctx.new_node(Op::RMS_NORM_Q8_1, DType::I8, {bytes, 1, 1, 1}, {r->src[0], r->src[1]});
  p->op_params = r->op_params;  // eps
  if (!s_rms_norm_q8_1(*p)) return false;
  c->src[0] = p;
  const bool ok = c->op == Op::QKV ? s_qkv(*c) : s_ffn_swiglu(*c);
  if (!ok) c->src[0] = r;
  return ok;
}

// A MoE FFN's norm: RMS_NORM read by the router (a float MUL_MAT) and, through the [n, 1, T]
// RESHAPE of the toolkit's MoeFfn, by the experts' FFN_SWIGLU at MMVQ sizes. One RMS_NORM_Q8_1
// writes the q8_1 planes the experts read and after them the f32 rows the router reads (a VIEW),
// instead of a norm kernel and a quantize kernel. The router is the MUL_MAT whose logits the
// experts' ids were picked from (ids = TOP_K(router x)); the norm has no other reader.
bool fuse_prequant_moe(Context& ctx, const Uses& u, Tensor* c) {
  Tensor *x3 = c->src[0], *ids = c->src[5];
  if (!ids || ids->op != Op::TOP_K || !x3 || x3->op != Op::RESHAPE || !u.single(x3)) return false;
  Tensor *r = x3->src[0], *router = ids->src[0];
  if (!r || r->op != Op::RMS_NORM || u(r) != 2 || !is_f32_matrix(r) || r->ne[0] % 32 != 0) return false;
  if (!router || router->op != Op::MUL_MAT || router->src[1] != r || router->src[0] == r) return false;
  const DType rt = router->src[0]->type;
  if (rt != DType::F32 && rt != DType::F16 && rt != DType::BF16) return false;
  const int64_t n = r->ne[0], T = r->ne[1];
  const size_t rows_at = q8_norm_rows_offset(T, n);
  const auto bytes = static_cast<int64_t>(rows_at + static_cast<size_t>(n * T) * 4);
  Tensor* p = ctx.new_node(Op::RMS_NORM_Q8_1, DType::I8, {bytes, 1, 1, 1}, {r->src[0], r->src[1]});
  p->op_params = r->op_params;  // eps
  p->set_param(1, int32_t{1});  // the f32 rows after the planes
  if (!s_rms_norm_q8_1(*p)) return false;
  c->src[0] = p;
  if (!s_ffn_swiglu(*c)) {
    c->src[0] = x3;
    return false;
  }
  router->src[1] = ctx.new_view(Op::VIEW, p, DType::F32, {n, T, 1, 1}, contiguous_strides(DType::F32, {n, T, 1, 1}),
                                rows_at);
  return true;
}

}  // namespace

void rewrite_graph(Context& ctx, Graph& g) {
  int changed = 0;
  {
    const Uses u(g);
    for (Tensor* t : g.nodes()) {
      if (t->op == Op::ATTENTION) changed += fuse_qkv(ctx, u, t);
      else if (t->op == Op::MUL_MAT) changed += fuse_ffn(ctx, u, t);
      else if (t->op == Op::ADD) changed += fuse_moe_sum(u, t);
      else if (t->op == Op::MUL_MAT_ID) changed += fuse_ffn_id(u, t);
    }
  }
  if (changed) g.rebuild();
  // The residual and prequantization fusions see the QKV / FFN_SWIGLU nodes made above.
  int more = 0;
  {
    const Uses u(g);
    for (Tensor* t : g.nodes())
      if (t->op == Op::ADD) more += fuse_residual(u, t);
  }
  if (more) g.rebuild();
  changed += more;
  more = 0;
  {
    const Uses u(g);
    for (Tensor* t : g.nodes())
      if (t->op == Op::QKV || t->op == Op::FFN_SWIGLU) more += fuse_prequant(ctx, u, t) || fuse_prequant_moe(ctx, u, t);
  }
  if (more) g.rebuild();
}

}  // namespace minfer::cuda
