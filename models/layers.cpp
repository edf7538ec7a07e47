#include "models/layers.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "gguf/gguf.h"
#include "ops/ops.h"
#include "runtime/kv_cache.h"

namespace minfer::models {

std::string blk_name(int il, std::string_view name, std::string_view kind) {
  return fmt::format("blk.{}.{}.{}", il, name, kind);
}

Tensor* residual_add(Context& ctx, Tensor* x, Tensor* h) { return ops::add(ctx, x, h); }

RmsNorm RmsNorm::load(Weights& W, std::string_view name, int64_t n, float eps) { return {W.get(name, {n}), eps}; }

Tensor* RmsNorm::forward(Context& ctx, Tensor* x) const { return ops::rms_norm(ctx, x, eps, weight); }

AttentionParams AttentionParams::from(const HParams& h) {
  AttentionParams p;
  p.n_head = h.n_head;
  p.n_head_kv = h.n_head_kv;
  p.head_dim = h.head_dim;
  p.rope = h.rope_params();  // the mode the model gave HParams, the GGUF's scaling, the overrides
  if (p.rope.n_rot == 0) p.rope.n_rot = h.head_dim;
  p.norm_eps = h.rms_eps;  // q_norm / k_norm are the model's RMSNorm (read only when present)
  p.head_dim_v = h.head_dim_v;
  p.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
  return p;
}

Attention Attention::load(Weights& W, int il, const HParams& h, const AttentionSpec& spec, Tensor* rope_freqs) {
  const int64_t n_embd = h.n_embd, nq = int64_t{h.n_head} * h.head_dim, nk = int64_t{h.n_head_kv} * h.head_dim,
                nv = int64_t{h.n_head_kv} * h.head_dim_v;
  Attention a;
  // One tensor for wq|wk|wv when the dtypes allow it: forward() then runs one matmul.
  // Tensor parallelism: a rank's heads are its rows of q/k/v (column-parallel) and its columns
  // of attn_output (row-parallel, partial sums for the all-reduce).
  auto qkv = W.get_concat_rows(
      {{blk_name(il, "attn_q"), {n_embd, nq}}, {blk_name(il, "attn_k"), {n_embd, nk}}, {blk_name(il, "attn_v"), {n_embd, nv}}},
      Split::ROWS);
  a.wq = qkv[0];
  a.wk = qkv[1];
  a.wv = qkv[2];
  if (spec.qkv_bias) {
    a.bq = W.get_split(blk_name(il, "attn_q", "bias"), Split::ROWS, {nq});
    a.bk = W.get_split(blk_name(il, "attn_k", "bias"), Split::ROWS, {nk});
    a.bv = W.get_split(blk_name(il, "attn_v", "bias"), Split::ROWS, {nv});
  }
  if (spec.qk_norm) {
    a.q_norm = W.get(blk_name(il, "attn_q_norm"), {h.head_dim});
    a.k_norm = W.get(blk_name(il, "attn_k_norm"), {h.head_dim});
  }
  a.rope_freqs = rope_freqs;
  a.wo = W.get_split(blk_name(il, "attn_output"), Split::COLUMNS, {int64_t{h.n_head} * h.head_dim_v, n_embd});
  a.shard = W.shard();
  return a;
}

namespace {

// Rows [row0, row0 + heads * hd) of the f32 projection m [rows, n_tokens] as heads
// [hd, heads, n_tokens] (a strided view: no copy).
Tensor* heads_of(Context& ctx, Tensor* m, int64_t row0, int64_t heads, int64_t hd) {
  return view(ctx, m, {hd, heads, m->ne[1]}, {static_cast<size_t>(hd) * sizeof(float), m->nb[1]},
              static_cast<size_t>(row0) * sizeof(float));
}

}  // namespace

Attention::Projected Attention::project(Context& ctx, Tensor* x, Tensor* pos, Tensor* cells, Tensor* k_cache,
                                        Tensor* v_cache, const AttentionParams& p) const {
  const int64_t hd = p.head_dim, hdv = p.head_dim_v, nq = p.n_head * hd, nk = p.n_head_kv * hd;
  Tensor *q, *k, *v;
  Tensor* wqk = adjacent_rows(ctx, wq, wk);
  if (Tensor* wqkv = wqk ? adjacent_rows(ctx, wqk, wv) : nullptr) {  // q_proj|k_proj|v_proj as one matmul
    Tensor* m = ops::mul_mat(ctx, wqkv, x);
    q = heads_of(ctx, m, 0, p.n_head, hd);
    k = heads_of(ctx, m, nq, p.n_head_kv, hd);
    v = heads_of(ctx, m, nq + nk, p.n_head_kv, hdv);
  } else {
    q = heads_of(ctx, ops::mul_mat(ctx, wq, x), 0, p.n_head, hd);
    k = heads_of(ctx, ops::mul_mat(ctx, wk, x), 0, p.n_head_kv, hd);
    v = heads_of(ctx, ops::mul_mat(ctx, wv, x), 0, p.n_head_kv, hdv);
  }
  // Biases are per output row, i.e. [head_dim, heads] broadcast over the tokens.
  if (bq) q = ops::add(ctx, q, reshape(ctx, bq, {hd, p.n_head}));
  if (bk) k = ops::add(ctx, k, reshape(ctx, bk, {hd, p.n_head_kv}));
  if (bv) v = ops::add(ctx, v, reshape(ctx, bv, {hdv, p.n_head_kv}));
  if (q_norm) q = ops::rms_norm(ctx, q, p.norm_eps, q_norm);
  if (k_norm) k = ops::rms_norm(ctx, k, p.norm_eps, k_norm);
  q = ops::rope(ctx, q, pos, p.rope, rope_freqs);
  k = ops::rope(ctx, k, pos, p.rope, rope_freqs);
  return {q, ops::kv_store(ctx, k_cache, k, cells), ops::kv_store(ctx, v_cache, v, cells)};
}

Tensor* Attention::forward(Context& ctx, Tensor* x, const Batch& b, KvCache& kv, int il, const AttentionParams& p) const {
  const Projected pr = project(ctx, x, b.pos, b.cells, kv.k(il, shard.rank), kv.v(il, shard.rank), p);
  // The stores alias the caches: attention reads them, so it runs after both.
  Tensor* a = ops::attention(ctx, pr.q, pr.k_store, pr.v_store, b.pos, b.seq, kv.block_table(shard.rank),
                             kv.block_size(), p.kq_scale);
  a = reshape(ctx, a, {static_cast<int64_t>(p.head_dim_v) * p.n_head, b.tokens->ne[0]});
  Tensor* out = ops::mul_mat(ctx, wo, a);
  return shard.split() ? ops::all_reduce(ctx, out) : out;
}

ShardRange ShardRange::load(Weights& W, std::string_view name, int64_t size) {
  const Shard& s = W.shard();
  if (size % s.n != 0)
    throw std::invalid_argument(fmt::format("{}: {} indices do not split into {} equal ranges", name, size, s.n));
  const int64_t n = size / s.n, first = s.rank * n;
  std::vector<int32_t> local(static_cast<size_t>(size), 0);
  std::vector<float> mask(static_cast<size_t>(size), 0.0f);
  for (int64_t i = first; i < first + n; ++i) {
    local[static_cast<size_t>(i)] = static_cast<int32_t>(i - first);
    mask[static_cast<size_t>(i)] = 1.0f;
  }
  return {W.constant(fmt::format("{}.local", name), DType::I32, {1, size}, local.data()),
          W.constant(fmt::format("{}.mask", name), DType::F32, {1, size}, mask.data())};
}

ShardRange::Lookup ShardRange::lookup(Context& ctx, Tensor* ids) const {
  // A 2-D table [1, size] looked up by ids [n, b] gives [1, n, b].
  return {reshape(ctx, ops::get_rows(ctx, local, ids), {ids->ne[0], ids->ne[1]}), ops::get_rows(ctx, mask, ids)};
}

SwiGluFfn SwiGluFfn::load(Weights& W, int il, const HParams& h) {
  const int64_t n_embd = h.n_embd, n_ff = h.n_ff;
  auto gu = W.get_concat_rows({{blk_name(il, "ffn_gate"), {n_embd, n_ff}}, {blk_name(il, "ffn_up"), {n_embd, n_ff}}},
                              Split::ROWS);
  return {gu[0], gu[1], W.get_split(blk_name(il, "ffn_down"), Split::COLUMNS, {n_ff, n_embd}), W.shard()};
}

Tensor* SwiGluFfn::forward(Context& ctx, Tensor* x) const {
  Tensor* h;
  if (Tensor* gu = adjacent_rows(ctx, gate, up)) {  // gate_proj|up_proj as one matmul
    Tensor* m = ops::mul_mat(ctx, gu, x);
    const int64_t n_ff = gate->ne[1];
    h = ops::swiglu(ctx, view(ctx, m, {n_ff, x->ne[1]}, {m->nb[1]}, 0),
                    view(ctx, m, {n_ff, x->ne[1]}, {m->nb[1]}, static_cast<size_t>(n_ff) * sizeof(float)));
  } else {
    h = ops::swiglu(ctx, ops::mul_mat(ctx, gate, x), ops::mul_mat(ctx, up, x));
  }
  Tensor* out = ops::mul_mat(ctx, down, h);
  return shard.split() ? ops::all_reduce(ctx, out) : out;
}

MoeFfn MoeFfn::load(Weights& W, int il, const HParams& h, bool norm_topk_prob) {
  if (h.n_expert <= 0 || h.n_ff_exp <= 0 || h.n_expert_used <= 0)
    throw std::invalid_argument(fmt::format("{}: a MoE FFN needs {}.expert_count, expert_used_count and "
                                            "expert_feed_forward_length", W.file().name(), h.arch));
  // Expert tensors are [n_in, n_out, n_expert]; a rank's are whole experts.
  auto exps = [&](const char* name, int64_t n_in, int64_t n_out) {
    return W.get_split(blk_name(il, name), Split::EXPERTS, {n_in, n_out, h.n_expert});
  };
  MoeFfn f;
  f.router = W.get(blk_name(il, "ffn_gate_inp"), {h.n_embd, h.n_expert});
  f.gate_exps = exps("ffn_gate_exps", h.n_embd, h.n_ff_exp);
  f.up_exps = exps("ffn_up_exps", h.n_embd, h.n_ff_exp);
  f.down_exps = exps("ffn_down_exps", h.n_ff_exp, h.n_embd);
  f.k = h.n_expert_used;
  f.norm_topk_prob = norm_topk_prob;
  f.shard = W.shard();
  if (f.shard.split()) f.experts = ShardRange::load(W, fmt::format("blk.{}.ffn_exps", il), h.n_expert);
  return f;
}

Tensor* MoeFfn::forward(Context& ctx, Tensor* x) const {
  const int64_t n_embd = x->ne[0], n_tokens = x->ne[1], n_expert = router->ne[1];
  Tensor* logits = ops::mul_mat(ctx, router, x);  // [n_expert, n_tokens]
  // softmax is monotonic: the top-k logits select the experts of the top-k probabilities.
  Tensor* ids = ops::top_k(ctx, logits, k);  // I32 [k, n_tokens]
  Tensor* w;
  if (norm_topk_prob) {
    // softmax(l)_i / sum over the selected j of softmax(l)_j = exp(l_i) / sum exp(l_j): the
    // softmax over the selected logits.
    w = ops::get_rows(ctx, reshape(ctx, logits, {1, n_expert, n_tokens}), ids);  // [1, k, n_tokens]
    w = ops::soft_max(ctx, reshape(ctx, w, {k, n_tokens}), 1.0f);
  } else {
    Tensor* probs = ops::soft_max(ctx, logits, 1.0f);
    w = ops::get_rows(ctx, reshape(ctx, probs, {1, n_expert, n_tokens}), ids);
  }
  w = reshape(ctx, w, {1, k, n_tokens});
  if (shard.split()) {
    // The rank's experts: ids mapped to its local ones (another rank's to a valid local expert),
    // whose slots then weigh 0. Every slot is still computed: mul_mat_id has no skipped slot.
    const ShardRange::Lookup l = experts.lookup(ctx, ids);
    ids = l.ids;
    w = ops::mul(ctx, w, l.mask);
  }
  Tensor* x3 = reshape(ctx, x, {n_embd, 1, n_tokens});  // one activation row per token, for all k
  Tensor* hid = ops::swiglu(ctx, ops::mul_mat_id(ctx, gate_exps, ids, x3), ops::mul_mat_id(ctx, up_exps, ids, x3));
  Tensor* y = ops::mul_mat_id(ctx, down_exps, ids, hid);  // [n_embd, k, n_tokens]
  y = ops::mul(ctx, y, w);
  // Sum over the k slots (llama.cpp's build_moe_ffn does the same with views).
  auto slot = [&](int64_t j) { return view(ctx, y, {n_embd, n_tokens}, {y->nb[2]}, static_cast<size_t>(j) * y->nb[1]); };
  Tensor* out = slot(0);
  for (int64_t j = 1; j < k; ++j) out = ops::add(ctx, out, slot(j));
  return shard.split() ? ops::all_reduce(ctx, out) : out;
}

Embedding Embedding::load(Weights& W, const HParams& h) {
  Embedding e;
  e.weight = W.get_split("token_embd.weight", Split::ROWS, {h.n_embd, h.n_vocab});
  e.shard = W.shard();
  if (e.shard.split()) e.vocab = ShardRange::load(W, "token_embd", h.n_vocab);
  return e;
}

Tensor* Embedding::forward(Context& ctx, Tensor* tokens) const {
  if (!shard.split()) return ops::get_rows(ctx, weight, tokens);
  // Another rank's token reads local row 0 and is zeroed; the all-reduce adds the one rank's row.
  const ShardRange::Lookup l = vocab.lookup(ctx, tokens);
  Tensor* x = ops::mul(ctx, ops::get_rows(ctx, weight, l.ids), l.mask);  // [n_embd, n_tokens, 1]
  return ops::all_reduce(ctx, reshape(ctx, x, {x->ne[0], x->ne[1]}));
}

LmHead LmHead::load(Weights& W, const HParams& h, const Embedding& tok_embd) {
  LmHead head;
  head.norm = RmsNorm::load(W, "output_norm.weight", h.n_embd, h.rms_eps);
  head.output = W.find_split("output.weight", Split::ROWS, {h.n_embd, h.n_vocab});
  if (!head.output) head.output = tok_embd.weight;  // tied embeddings: the rank's rows of it when split
  head.shard = W.shard();
  return head;
}

Tensor* LmHead::forward(Context& ctx, Tensor* x, Tensor* out_rows) const {
  // Keep only the rows that need logits (the last token while generating) before the norm and
  // the vocabulary-sized matmul.
  x = ops::get_rows(ctx, x, out_rows);
  Tensor* logits = ops::mul_mat(ctx, output, norm.forward(ctx, x));  // [n_vocab / N, n_out]
  return shard.split() ? ops::all_gather(ctx, logits, shard.n) : logits;
}

}  // namespace minfer::models
