#include "runtime/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "tensor/graph.h"

namespace minfer {

int32_t Session::resolve_n_ctx(const Model& model, const SessionParams& p) {
  if (p.n_ctx > 0) return p.n_ctx;
  const HParams& h = model.hparams();
  const size_t per_pos = KvCache::bytes_needed(h.n_layer, h.n_head_kv, h.head_dim, h.head_dim_v, 1, p.kv_type);
  const auto budget_ctx = static_cast<int64_t>(p.kv_budget_bytes / std::max<size_t>(per_pos, 1));
  return static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(h.n_ctx_train, budget_ctx)));
}

Session::Session(const Model& model, Backend& backend, const SessionParams& p)
    : model_(model),
      backend_(backend),
      params_(p),
      kv_(backend, model.hparams().n_layer, model.hparams().n_head_kv, model.hparams().head_dim,
          model.hparams().head_dim_v, KvCacheParams{resolve_n_ctx(model, p), p.kv_type}),
      exec_(backend) {
  if (params_.n_batch <= 0) throw std::invalid_argument(fmt::format("n_batch must be positive, got {}", params_.n_batch));
  // Measure pass: the largest ubatch with all logits is the worst case of every later graph, so
  // building (and keeping) it now sizes the arena once and makes an impossible context fail here.
  step_graph(std::min(params_.n_batch, kv_.n_ctx()), std::min(params_.n_batch, kv_.n_ctx()));
}

void Session::rollback(int32_t n) {
  if (n < 0 || n > kv_.n_past())
    throw std::out_of_range(fmt::format("rollback to {} outside [0, {}]", n, kv_.n_past()));
  kv_.set_n_past(n);
}

std::span<const float> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) throw std::invalid_argument("eval: no tokens");
  const int64_t need = static_cast<int64_t>(kv_.n_past()) + static_cast<int64_t>(tokens.size());
  if (need > kv_.n_ctx())
    throw ContextFullError(fmt::format("the sequence needs {} positions ({} evaluated + {} new) but the context holds {} "
                                       "(n_ctx); use -c to raise it",
                                       need, kv_.n_past(), tokens.size(), kv_.n_ctx()));
  const int32_t n_vocab = model_.hparams().n_vocab;
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) throw std::invalid_argument(fmt::format("token id {} outside the vocabulary [0, {})", t, n_vocab));
  logits_.resize(all_logits ? tokens.size() * static_cast<size_t>(n_vocab) : static_cast<size_t>(n_vocab));
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(params_.n_batch)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(params_.n_batch));
    const bool last = i + n == tokens.size();
    if (!all_logits && !last) {
      eval_ubatch(tokens.subspan(i, n), false, nullptr);
    } else {
      eval_ubatch(tokens.subspan(i, n), all_logits, all_logits ? logits_.data() + i * static_cast<size_t>(n_vocab) : logits_.data());
    }
  }
  return logits_;
}

Session::StepGraph& Session::step_graph(int64_t n_tokens, int64_t n_out) {
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->n_tokens != n_tokens || it->n_out != n_out) continue;
    graphs_.splice(graphs_.begin(), graphs_, it);
    StepGraph& sg = graphs_.front();
    // Another shape may have grown (replaced) the arena since: place this graph again.
    if (sg.arena_generation != exec_.allocator().generation()) {
      exec_.allocate(*sg.ctx, sg.graph);
      sg.arena_generation = exec_.allocator().generation();
    }
    return sg;
  }
  if (graphs_.size() == kMaxStepGraphs) graphs_.pop_back();
  StepGraph& sg = graphs_.emplace_front();
  sg.n_tokens = n_tokens;
  sg.n_out = n_out;
  sg.ctx = std::make_unique<Context>();
  Context& ctx = *sg.ctx;
  sg.batch.tokens = ctx.new_tensor(DType::I32, {n_tokens}, "tokens");
  sg.batch.pos = ctx.new_tensor(DType::I32, {n_tokens}, "pos");
  sg.batch.out_rows = ctx.new_tensor(DType::I32, {n_out}, "out_rows");
  for (Tensor* t : {sg.batch.tokens, sg.batch.pos, sg.batch.out_rows}) t->flags |= kTensorInput;
  sg.logits = model_.build(ctx, sg.batch, kv_);
  sg.graph.add_output(sg.logits);
  exec_.allocate(ctx, sg.graph);
  sg.arena_generation = exec_.allocator().generation();
  return sg;
}

void Session::eval_ubatch(std::span<const int32_t> tokens, bool all_logits, float* out) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t n_out = out == nullptr ? 1 : (all_logits ? n : 1);
  StepGraph& sg = step_graph(n, n_out);
  std::vector<int32_t> pos(static_cast<size_t>(n)), rows(static_cast<size_t>(n_out));
  std::iota(pos.begin(), pos.end(), kv_.n_past());
  if (n_out == n) std::iota(rows.begin(), rows.end(), 0);
  else rows[0] = static_cast<int32_t>(n - 1);
  backend_.set_tensor(*sg.batch.tokens, tokens.data(), 0, tokens.size_bytes());
  backend_.set_tensor(*sg.batch.pos, pos.data(), 0, pos.size() * 4);
  backend_.set_tensor(*sg.batch.out_rows, rows.data(), 0, rows.size() * 4);
  exec_.compute(sg.graph);
  if (out) backend_.get_tensor(*sg.logits, out, 0, static_cast<size_t>(n_out) * static_cast<size_t>(model_.hparams().n_vocab) * 4);
  backend_.synchronize();
  kv_.set_n_past(kv_.n_past() + static_cast<int32_t>(n));
}

}  // namespace minfer
