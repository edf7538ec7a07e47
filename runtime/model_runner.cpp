#include "runtime/model_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <unordered_map>

#include "tensor/collective.h"

namespace minfer {
namespace {

KvCacheParams kv_params(const Model& model, const RunnerParams& p) {
  if (p.n_batch <= 0) throw std::invalid_argument(fmt::format("n_batch must be positive, got {}", p.n_batch));
  if (p.n_seq_max <= 0) throw std::invalid_argument(fmt::format("the sequence count must be positive, got {}", p.n_seq_max));
  KvCacheParams kp;
  kp.n_ctx = ModelRunner::resolve_n_ctx(model, p);
  kp.block_size = p.block_size;
  kp.n_seq_max = p.n_seq_max;
  // One sequence gets the whole pool, as -c says (llama.cpp warns past context_length and goes on);
  // among several, none may outgrow the trained context unless asked.
  kp.n_ctx_seq = p.n_ctx_seq > 0    ? p.n_ctx_seq
                 : p.n_seq_max == 1 ? kp.n_ctx
                                    : std::min(kp.n_ctx, std::max(1, model.hparams().n_ctx_train));
  kp.type = p.kv_type;
  return kp;
}

}  // namespace

int32_t ModelRunner::resolve_n_ctx(const Model& model, const RunnerParams& p) {
  if (p.n_ctx > 0) return p.n_ctx;
  if (p.n_ctx < 0) throw std::invalid_argument(fmt::format("n_ctx must be >= 0, got {}", p.n_ctx));
  const HParams& h = model.hparams();
  const size_t per_cell = KvCache::bytes_per_cell(h.n_layer, h.n_head_kv, h.head_dim, h.head_dim_v, p.kv_type);
  const auto budget = static_cast<int64_t>(p.kv_budget_bytes / std::max<size_t>(per_cell, 1));
  const int64_t want = static_cast<int64_t>(std::max(1, h.n_ctx_train)) * std::max(1, p.n_seq_max);
  return static_cast<int32_t>(std::clamp<int64_t>(std::min(want, budget), 1, int64_t{1} << 30));
}

int64_t ModelRunner::bucket(int64_t n) { return n <= 16 ? n : (n + 15) / 16 * 16; }

namespace {

std::vector<Backend*> rank_backends(const std::vector<const Model*>& ranks) {
  std::vector<Backend*> b;
  for (const Model* m : ranks) b.push_back(&m->weights().backend());
  return b;
}

// The ranks as the runner keeps them, checked to be the n parts of one model.
template <typename Rank>
std::vector<Rank> make_ranks(const std::vector<const Model*>& models, const std::vector<Backend*>& backends) {
  if (models.empty()) throw std::invalid_argument("ModelRunner: no model");
  const int n = static_cast<int>(models.size());
  std::vector<Rank> ranks;
  for (int r = 0; r < n; ++r) {
    const Model* m = models[static_cast<size_t>(r)];
    const Shard& sh = m->weights().shard();
    if (sh.n != n || sh.rank != r)
      throw std::invalid_argument(fmt::format("ModelRunner: model {} of {} holds shard {} of {} (load rank r with Shard{{r, {}}})",
                                              r, n, sh.rank, sh.n, n));
    const HParams &h = m->hparams(), &h0 = models[0]->hparams();
    if (h.n_layer != h0.n_layer || h.n_head_kv != h0.n_head_kv || h.n_vocab != h0.n_vocab || h.arch != h0.arch)
      throw std::invalid_argument(fmt::format("ModelRunner: rank {} is another model than rank 0", r));
    Rank k;
    k.model = m;
    k.backend = backends[static_cast<size_t>(r)];
    k.exec = std::make_unique<Executor>(*k.backend);
    ranks.push_back(std::move(k));
  }
  return ranks;
}

}  // namespace

ModelRunner::ModelRunner(const Model& model, Backend& backend, const RunnerParams& p)
    : ModelRunner({&model}, {&backend}, nullptr, p) {}

ModelRunner::ModelRunner(const std::vector<const Model*>& ranks, std::shared_ptr<Collective> group,
                         const RunnerParams& p)
    : ModelRunner(ranks, rank_backends(ranks), std::move(group), p) {}

ModelRunner::ModelRunner(const std::vector<const Model*>& ranks, const std::vector<Backend*>& backends,
                         std::shared_ptr<Collective> group, const RunnerParams& p)
    : ranks_(make_ranks<Rank>(ranks, backends)),
      group_(std::move(group)),
      params_(p),
      kv_(backends, model().hparams().n_layer, model().hparams().n_head_kv, model().hparams().head_dim,
          model().hparams().head_dim_v, kv_params(model(), p)) {
  if (ranks_.size() > 1 && (!group_ || group_->n_ranks() != n_ranks()))
    throw std::invalid_argument(fmt::format("ModelRunner: {} ranks need a tensor-parallel group of {}", n_ranks(), n_ranks()));
  params_.n_ctx = kv_.n_ctx();
  params_.n_ctx_seq = kv_.n_ctx_seq();
  // Measure pass: the largest ubatch with all logits is the worst case of every later graph, so
  // building (and keeping) it now sizes the arena once and makes an impossible setup fail here.
  const int64_t n = bucket(std::min(params_.n_batch, kv_.n_ctx()));
  const int64_t n_out = params_.n_out_max > 0 ? std::min<int64_t>(bucket(params_.n_out_max), n) : n;
  for (Rank& r : ranks_) step_graph(r, n, n_out);
}

ModelRunner::~ModelRunner() = default;

ModelRunner::StepGraph& ModelRunner::step_graph(Rank& rank, int64_t n_tokens, int64_t n_out) {
  auto& graphs = rank.graphs;
  Executor& exec = *rank.exec;
  for (auto it = graphs.begin(); it != graphs.end(); ++it) {
    if (it->n_tokens != n_tokens || it->n_out != n_out) continue;
    graphs.splice(graphs.begin(), graphs, it);
    StepGraph& sg = graphs.front();
    // Another shape may have grown (replaced) the arena since: place this graph again.
    if (sg.arena_generation != exec.allocator().generation()) {
      exec.allocate(*sg.ctx, sg.graph);
      sg.arena_generation = exec.allocator().generation();
    }
    return sg;
  }
  if (graphs.size() == kMaxStepGraphs) graphs.pop_back();
  StepGraph& sg = graphs.emplace_front();
  sg.n_tokens = n_tokens;
  sg.n_out = n_out;
  sg.ctx = std::make_unique<Context>();
  Context& ctx = *sg.ctx;
  sg.batch.tokens = ctx.new_tensor(DType::I32, {n_tokens}, "tokens");
  sg.batch.pos = ctx.new_tensor(DType::I32, {n_tokens}, "pos");
  sg.batch.seq = ctx.new_tensor(DType::I32, {n_tokens}, "seq");
  sg.batch.cells = ctx.new_tensor(DType::I32, {n_tokens}, "cells");
  sg.batch.out_rows = ctx.new_tensor(DType::I32, {n_out}, "out_rows");
  for (Tensor* t : {sg.batch.tokens, sg.batch.pos, sg.batch.seq, sg.batch.cells, sg.batch.out_rows})
    t->flags |= kTensorInput;
  sg.logits = rank.model->build(ctx, sg.batch, kv_);
  sg.graph.add_output(sg.logits);
  exec.allocate(ctx, sg.graph);
  sg.arena_generation = exec.allocator().generation();
  return sg;
}

namespace {
constexpr size_t kPinnedLogitsMax = size_t{256} << 20;
}  // namespace

void ModelRunner::compute_ranks(int64_t n_tokens, int64_t n_out, size_t n_logits) {
  // Graphs are placed (and allocation can fail) before any rank computes: a rank that stops
  // before its first all-reduce would leave the others waiting.
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<StepGraph*> sgs;
  for (Rank& r : ranks_) sgs.push_back(&step_graph(r, n_tokens, n_out));
  kv_.sync();
  const auto t1 = Clock::now();
  auto run = [&](size_t i) {
    Backend& b = *ranks_[i].backend;
    StepGraph& sg = *sgs[i];
    b.set_tensor(*sg.batch.tokens, tokens_.data(), 0, tokens_.size() * 4);
    b.set_tensor(*sg.batch.pos, pos_.data(), 0, pos_.size() * 4);
    b.set_tensor(*sg.batch.seq, seq_.data(), 0, seq_.size() * 4);
    b.set_tensor(*sg.batch.cells, cells_.data(), 0, cells_.size() * 4);
    b.set_tensor(*sg.batch.out_rows, rows_.data(), 0, rows_.size() * 4);
    ranks_[i].exec->compute(sg.graph);
    b.synchronize();
  };
  if (ranks_.size() == 1) {
    run(0);
  } else {
    std::vector<std::exception_ptr> errors(ranks_.size());
    auto guarded = [&](size_t i) {
      try {
        run(i);
      } catch (...) {
        errors[i] = std::current_exception();
        group_->abort();  // the other ranks must not wait for this one's all-reduces
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < ranks_.size(); ++i) threads.emplace_back(guarded, i);
    guarded(0);
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  const auto t2 = Clock::now();
  const size_t n_floats = n_logits * static_cast<size_t>(n_vocab());
  if (n_floats > logits_cap_) {
    logits_mem_.reset();  // (the old block first: the new one may be large)
    logits_cap_ = 0;
    // Pinned up to kPinnedLogitsMax (~440 rows of a 152k vocabulary): decode steps and verify
    // batches; a prefill that asks for every row's logits (perplexity) takes heap memory rather
    // than pinning gigabytes.
    Backend& b = *ranks_[0].backend;
    logits_mem_ = n_floats * 4 <= kPinnedLogitsMax ? b.alloc_host(n_floats * 4) : b.Backend::alloc_host(n_floats * 4);
    logits_cap_ = n_floats;
  }
  auto* out = static_cast<float*>(logits_mem_.get());
  if (n_logits > 0) ranks_[0].backend->get_tensor(*sgs[0]->logits, out, 0, n_floats * 4);
  logits_ = std::span<const float>(out, n_floats);
  const auto t3 = Clock::now();
  times_.graph_s += std::chrono::duration<double>(t1 - t0).count();
  times_.compute_s += std::chrono::duration<double>(t2 - t1).count();
  times_.logits_s += std::chrono::duration<double>(t3 - t2).count();
}

void ModelRunner::warmup(int32_t n_rows) {
  const RunnerTimes before = times_;
  std::vector<int32_t> seqs;
  auto free_all = [&] {
    for (int32_t s : seqs) kv_.seq_free(s);
    seqs.clear();
  };
  try {
    // What fits now: a sequence slot and a block per row, and two tokens in each sequence (one
    // where a sequence holds a single token).
    const int32_t rows = std::min({n_rows, params_.n_batch, kv_.n_seq_max() - kv_.n_seq(), kv_.pool().n_free()});
    const int reps = std::min(kv_.n_ctx_seq(), kv_.block_size()) >= 2 ? 2 : 1;
    std::vector<BatchToken> batch;
    for (int64_t n = 1; rows > 0; n = bucket(n + 1)) {  // the largest size of each bucket
      const int64_t m = std::min<int64_t>(n, rows);
      while (static_cast<int64_t>(seqs.size()) < m) seqs.push_back(kv_.seq_new());
      batch.clear();
      for (int64_t i = 0; i < m; ++i) batch.push_back({seqs[static_cast<size_t>(i)], 0, true});
      for (int rep = 0; rep < reps; ++rep) decode(batch);
      free_all();
      if (m == rows) break;
    }
    // One full ubatch (the prefill kernels), as far as one sequence and the free cells hold it.
    const int32_t n_fill = std::min({params_.n_batch, kv_.n_ctx_seq(), kv_.pool().n_free() * kv_.block_size()});
    if (n_fill > 0 && kv_.n_seq() < kv_.n_seq_max()) {
      seqs.push_back(kv_.seq_new());
      batch.assign(static_cast<size_t>(n_fill), BatchToken{seqs.front(), 0, false});
      batch.back().logits = true;
      decode(batch);
    }
  } catch (...) {
    free_all();
    times_ = before;
    throw;
  }
  free_all();
  times_ = before;  // no request's work
}

std::span<const float> ModelRunner::decode(std::span<const BatchToken> batch) {
  const auto n = static_cast<int64_t>(batch.size());
  if (n == 0) throw std::invalid_argument("decode: empty batch");
  if (n > params_.n_batch)
    throw std::invalid_argument(fmt::format("decode: {} tokens exceed the batch size {} (n_batch)", n, params_.n_batch));
  const int32_t n_vocab = this->n_vocab();
  // Tokens per sequence, in order of first appearance; validate before touching the cache.
  std::vector<std::pair<int32_t, int32_t>> counts;  // (seq, tokens)
  std::unordered_map<int32_t, size_t> where;
  int64_t n_logits = 0;
  for (const BatchToken& t : batch) {
    if (t.token < 0 || t.token >= n_vocab)
      throw std::invalid_argument(fmt::format("token id {} outside the vocabulary [0, {})", t.token, n_vocab));
    if (!kv_.seq_exists(t.seq)) throw std::invalid_argument(fmt::format("decode: sequence {} does not exist", t.seq));
    auto [it, fresh] = where.try_emplace(t.seq, counts.size());
    if (fresh) counts.emplace_back(t.seq, 0);
    ++counts[it->second].second;
    n_logits += t.logits ? 1 : 0;
  }
  // Cells for every sequence, all or nothing.
  std::vector<int32_t> first_pos(counts.size()), first_cell(counts.size());
  std::vector<int32_t> cells;
  cells.reserve(static_cast<size_t>(n));
  size_t done = 0;
  try {
    for (; done < counts.size(); ++done) {
      first_pos[done] = kv_.seq_len(counts[done].first);
      first_cell[done] = static_cast<int32_t>(cells.size());
      kv_.seq_append(counts[done].first, counts[done].second, cells);
    }
  } catch (...) {
    for (size_t i = 0; i < done; ++i) kv_.seq_truncate(counts[i].first, first_pos[i]);
    throw;
  }

  const int64_t n_pad = bucket(n), n_out = bucket(std::max<int64_t>(n_logits, 1));
  tokens_.assign(static_cast<size_t>(n_pad), 0);
  pos_.assign(static_cast<size_t>(n_pad), 0);
  seq_.assign(static_cast<size_t>(n_pad), kv_.null_seq());
  cells_.assign(static_cast<size_t>(n_pad), kv_.null_cell());
  rows_.assign(static_cast<size_t>(n_out), 0);
  std::vector<int32_t> seen(counts.size(), 0);
  int64_t r = 0;
  for (int64_t i = 0; i < n; ++i) {
    const BatchToken& t = batch[static_cast<size_t>(i)];
    const size_t c = where[t.seq];
    const auto ui = static_cast<size_t>(i);
    tokens_[ui] = t.token;
    pos_[ui] = first_pos[c] + seen[c];
    seq_[ui] = t.seq;
    cells_[ui] = cells[static_cast<size_t>(first_cell[c] + seen[c])];
    ++seen[c];
    if (t.logits) rows_[static_cast<size_t>(r++)] = static_cast<int32_t>(i);
  }
  try {
    compute_ranks(n_pad, n_out, static_cast<size_t>(n_logits));
  } catch (...) {
    for (size_t i = 0; i < counts.size(); ++i) kv_.seq_truncate(counts[i].first, first_pos[i]);
    throw;
  }
  return logits_;
}

}  // namespace minfer
