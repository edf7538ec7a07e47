#include "ops/lower.h"

#include <stdexcept>

#include "ops/ops.h"

namespace minfer::ops {
namespace {

// Makes `node` compute what `proto` (a freshly built node) computes, keeping node's identity.
// `deps` (ordering only) go after the first `n_src` slots, the sources proto's op reads (even
// null ones: ROPE reads an optional src[2]).
void become(Tensor* node, const Tensor* proto, std::initializer_list<Tensor*> deps = {}, int n_src = 0) {
  node->op = proto->op;
  node->op_params = proto->op_params;
  node->src = proto->src;
  int slot = n_src;
  while (slot < kMaxSrc && node->src[slot]) ++slot;
  for (Tensor* d : deps) {
    if (slot >= kMaxSrc) throw std::logic_error("decompose: no source slot left for an ordering dependency");
    node->src[slot++] = d;
  }
}

// Rows [row0, row0 + rows) of a 2-D [n, N] f32 matrix, reshaped to [head_dim, rows / head_dim, N].
Tensor* head_view(Context& ctx, Tensor* m, int64_t row0, int64_t rows, int64_t hd) {
  const size_t es = dtype_type_size(m->type);
  return view(ctx, m, {hd, rows / hd, m->ne[1]}, {static_cast<size_t>(hd) * es, m->nb[1]}, row0 * es);
}

void decompose_ffn(Context& ctx, Tensor* node) {
  Tensor *x = node->src[0], *wg = node->src[1], *wu = node->src[2], *wd = node->src[3];
  Tensor* h;
  if (Tensor* wgu = adjacent_rows(ctx, wg, wu)) {
    Tensor* gu = mul_mat(ctx, wgu, x);
    const int64_t n_ff = wg->ne[1];
    Tensor* g = view(ctx, gu, {n_ff, x->ne[1]}, {gu->nb[1]}, 0);
    Tensor* u = view(ctx, gu, {n_ff, x->ne[1]}, {gu->nb[1]}, static_cast<size_t>(n_ff) * sizeof(float));
    h = swiglu(ctx, g, u);
  } else {
    h = swiglu(ctx, mul_mat(ctx, wg, x), mul_mat(ctx, wu, x));
  }
  Context scratch;
  Tensor proto;
  proto = *mul_mat(scratch, wd, h);
  become(node, &proto);
}

void decompose_qkv(Context& ctx, Tensor* node) {
  Tensor* x = node->src[0];
  Tensor *wq = node->src[1], *wk = node->src[2], *wv = node->src[3];
  Tensor *bq = node->src[4], *bk = node->src[5], *bv = node->src[6];
  Tensor *q_norm = node->src[7], *k_norm = node->src[8];
  Tensor *pos = node->src[9], *k_cache = node->src[10], *v_cache = node->src[11], *cells = node->src[12];
  Tensor* rope_freqs = node->src[13];
  const int64_t hd = node->param<int32_t>(2);
  const float eps = node->param<float>(3);
  const RopeParams rp = rope_params_of(*node, 4);
  const int64_t nq = wq->ne[1], nk = wk->ne[1], nv = wv->ne[1];

  Tensor *q, *k, *v;
  Tensor* wqk = adjacent_rows(ctx, wq, wk);
  Tensor* wqkv = wqk ? adjacent_rows(ctx, wqk, wv) : nullptr;
  if (wqkv) {
    Tensor* m = mul_mat(ctx, wqkv, x);
    q = head_view(ctx, m, 0, nq, hd);
    k = head_view(ctx, m, nq, nk, hd);
    v = head_view(ctx, m, nq + nk, nv, hd);
  } else {
    Tensor* mq = mul_mat(ctx, wq, x);
    Tensor* mk = mul_mat(ctx, wk, x);
    Tensor* mv = mul_mat(ctx, wv, x);
    q = head_view(ctx, mq, 0, nq, hd);
    k = head_view(ctx, mk, 0, nk, hd);
    v = head_view(ctx, mv, 0, nv, hd);
  }
  // Biases are per output row, i.e. [head_dim, n_heads] per token.
  if (bq) q = add(ctx, q, reshape(ctx, bq, {hd, nq / hd}));
  if (bk) k = add(ctx, k, reshape(ctx, bk, {hd, nk / hd}));
  if (bv) v = add(ctx, v, reshape(ctx, bv, {hd, nv / hd}));
  if (q_norm) {
    q = rms_norm(ctx, q, eps, q_norm);
    k = rms_norm(ctx, k, eps, k_norm);
  }
  k = rope(ctx, k, pos, rp, rope_freqs);
  Tensor* ks = kv_store(ctx, k_cache, k, cells);
  Tensor* vs = kv_store(ctx, v_cache, v, cells);
  Context scratch;
  Tensor proto;
  proto = *rope(scratch, q, pos, rp, rope_freqs);
  become(node, &proto, {ks, vs}, /*n_src=*/3);  // ROPE reads x, pos, freq_factors
}

}  // namespace

void decompose(Context& ctx, Tensor* node) {
  switch (node->op) {
    case Op::FFN_SWIGLU: return decompose_ffn(ctx, node);
    case Op::QKV: return decompose_qkv(ctx, node);
    default: throw std::invalid_argument(std::string("decompose: ") + std::string(op_name(node->op)) + " is not a fused op");
  }
}

int lower_fused(Context& ctx, Graph& g, const Backend& backend) {
  int n = 0;
  const auto nodes = g.nodes();  // copy: decompose adds tensors, the order is rebuilt below
  for (Tensor* t : nodes) {
    if (!op_is_fused(t->op) || backend.supports_op(*t)) continue;
    decompose(ctx, t);
    ++n;
  }
  if (n) g.rebuild();
  return n;
}

}  // namespace minfer::ops
