#include "runtime/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "ops/cpu/thread_pool.h"
#include "runtime/token_sink.h"

namespace minfer {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The prefix-cache key of a full block: a chain over the previous block's key and this block's
// tokens (splitmix64 finalizer per step), so equal keys mean equal whole prefixes. 64 bits: a
// collision among a pool's few thousand blocks has odds far below 1e-10.
constexpr uint64_t kRootHash = 0x6d696e6665722d31ull;  // "minfer-1"
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t block_hash(uint64_t prev, const int32_t* tokens, int32_t n) {
  uint64_t h = mix64(prev + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(n));
  for (int32_t i = 0; i < n; ++i) h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) + 0x9e3779b97f4a7c15ull));
  return h;
}

// One sampled row of a step: its sequence's sampler, its logits, the token drawn.
struct Pick {
  Sampler* sampler;
  std::span<const float> row;
  int32_t token = -1;
};

// Below this vocabulary a row samples in well under 0.1 ms and threads would cost more than they
// save (at 8k, the fixtures' vocabulary, about even: the scheduler tests run this path).
constexpr size_t kParallelSampleVocab = 8192;

// Whether a step's picks may be drawn in parallel. Distinct samplers are independent (each
// samples once a step); a caller may lend one sampler to several requests (Request::sampler),
// and those must draw in order.
bool parallel_picks(const std::vector<Pick>& picks) {
  if (picks.size() < 2 || picks.front().row.size() < kParallelSampleVocab) return false;
  std::vector<const Sampler*> owners;
  for (const Pick& p : picks) owners.push_back(p.sampler);
  std::sort(owners.begin(), owners.end());
  return std::adjacent_find(owners.begin(), owners.end()) == owners.end();
}

// Draws every pick's token, the tokens those of a serial loop. Rows of a large vocabulary are
// drawn in parallel on the scheduler's pool: full-vocabulary sampling (OpenAI's defaults) costs
// ~1-2 ms a row, against a GPU decode step of ~10 ms for 16 rows. The pool starts with the first
// step that needs it (a scheduler that never runs two sequences never starts it) and its threads
// serve every later step, instead of threads started and joined each step.
void sample_rows(std::vector<Pick>& picks, std::unique_ptr<cpu::ThreadPool>& pool, int32_t n_parallel) {
  if (!parallel_picks(picks)) {
    for (Pick& p : picks) p.token = p.sampler->sample(p.row);
    return;
  }
  if (!pool) {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    pool = std::make_unique<cpu::ThreadPool>(std::min(hw, n_parallel));  // the stepping thread draws too
  }
  // Every row draws even when one throws; the first row's error is raised, as the serial loop
  // would raise it (the pool rethrows its lowest failing chunk's error, a chunk its first one).
  pool->parallel_for(static_cast<int64_t>(picks.size()), 1, [&](int64_t b, int64_t e) {
    std::exception_ptr first;
    for (int64_t i = b; i < e; ++i) {
      try {
        picks[i].token = picks[i].sampler->sample(picks[i].row);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  });
}

}  // namespace

struct Scheduler::Seq {
  Req* req = nullptr;
  int32_t choice = 0;
  int32_t kv = -1;        // KV sequence, -1 while waiting
  bool borrowed = false;  // the caller's sequence: never freed or preempted here
  std::vector<int32_t> pending;  // tokens still to evaluate (prompt chunks, or a recompute)
  std::vector<int32_t> history;  // tokens evaluated into kv by this scheduler (for a recompute)
  int32_t n_hashed = 0;          // leading full blocks registered in the prefix cache
  uint64_t last_hash = kRootHash;  // key of block n_hashed - 1
  int32_t next = -1;             // sampled token to evaluate in the next step
  bool sampled = false;          // has sampled at least one token
  Sampler* sampler = nullptr;
  std::unique_ptr<Sampler> own_sampler;
  std::function<void(std::string_view)> text_cb;
  std::unique_ptr<TokenSink> sink;
  bool done = false;
  Clock::time_point t_admit, t_first;
};

struct Scheduler::Req {
  RequestId id = 0;
  Request r;
  RequestResult result;
  std::vector<std::unique_ptr<Seq>> seqs;
  int32_t live = 0;
  bool forked = false;
  bool cancel = false;
  bool finished = false;
};

Scheduler::Scheduler(ModelRunner& runner, const tokenizer::Tokenizer& tok, const SchedulerParams& p)
    : runner_(runner), tok_(tok) {
  n_batch_ = p.n_batch > 0 ? std::min(p.n_batch, runner.n_batch()) : runner.n_batch();
  n_parallel_ = p.n_parallel > 0 ? std::min(p.n_parallel, runner.kv().n_seq_max()) : runner.kv().n_seq_max();
  n_parallel_ = std::min(n_parallel_, n_batch_);  // every running sequence gets its decode row
  prefix_cache_ = p.prefix_cache;
}

Scheduler::~Scheduler() {
  for (auto& [id, r] : reqs_)
    for (auto& s : r->seqs)
      if (s->kv >= 0 && !s->borrowed && runner_.kv().seq_exists(s->kv)) runner_.kv().seq_free(s->kv);
}

int32_t Scheduler::n_sampling_threads() const { return sample_pool_ ? sample_pool_->n_threads() - 1 : 0; }

int32_t Scheduler::n_running() const { return static_cast<int32_t>(running_.size()); }

int32_t Scheduler::n_running_requests() const {
  int32_t n = 0;
  const Req* last = nullptr;
  std::vector<const Req*> seen;
  for (const Seq* s : running_) {
    if (s->req == last || std::find(seen.begin(), seen.end(), s->req) != seen.end()) continue;
    seen.push_back(last = s->req);
    ++n;
  }
  return n;
}

RequestId Scheduler::submit(Request r) {
  if (r.prompt.empty()) throw std::invalid_argument("submit: empty prompt");
  if (r.n_choices < 1 || r.n_choices > n_parallel_)
    throw std::invalid_argument(fmt::format("submit: n_choices must be in [1, {}] (the parallel sequences), got {}",
                                            n_parallel_, r.n_choices));
  const int32_t n_vocab = runner_.n_vocab();
  for (int32_t t : r.prompt)
    if (t < 0 || t >= n_vocab) throw std::invalid_argument(fmt::format("token id {} outside the vocabulary [0, {})", t, n_vocab));
  KvCache& kv = runner_.kv();
  int64_t before = 0;
  if (r.seq >= 0) {
    if (!kv.seq_exists(r.seq)) throw std::invalid_argument(fmt::format("submit: KV sequence {} does not exist", r.seq));
    before = kv.seq_len(r.seq);
  }
  const int64_t need = before + static_cast<int64_t>(r.prompt.size());
  const int64_t limit = std::min<int64_t>(kv.n_ctx_seq(), kv.n_ctx());
  if (need > limit)
    throw ContextFullError(fmt::format("the prompt needs {} positions ({} evaluated + {} new) but the context holds {} "
                                       "(n_ctx); use -c to raise it",
                                       need, before, r.prompt.size(), limit));
  auto req = std::make_unique<Req>();
  req->id = next_id_++;
  req->r = std::move(r);
  req->result.choices.resize(static_cast<size_t>(req->r.n_choices));
  auto s = std::make_unique<Seq>();
  s->req = req.get();
  s->kv = req->r.seq;
  s->borrowed = req->r.seq >= 0;
  s->pending = req->r.prompt;
  if (req->r.sampler) {
    s->sampler = req->r.sampler;
  } else {
    s->own_sampler = std::make_unique<Sampler>(req->r.sampling);
    s->sampler = s->own_sampler.get();
  }
  for (int32_t t : req->r.prompt) s->sampler->accept(t);
  GenerateResult& res = req->result.choices[0];
  res.prompt_ids = req->r.prompt;
  Req* rp = req.get();
  s->text_cb = [rp](std::string_view text) {
    if (rp->r.on_text) rp->r.on_text(0, text);
  };
  s->sink = std::make_unique<TokenSink>(tok_, *s->sampler, rp->r.params, res, s->text_cb);
  waiting_.push_back(req.get());
  req->seqs.push_back(std::move(s));
  req->live = 1;
  const RequestId id = req->id;
  reqs_.emplace(id, std::move(req));
  return id;
}

void Scheduler::cancel(RequestId id) {
  auto it = reqs_.find(id);
  if (it != reqs_.end() && !it->second->finished) it->second->cancel = true;
}

bool Scheduler::finished(RequestId id) const {
  auto it = reqs_.find(id);
  return it != reqs_.end() && it->second->finished;
}

RequestResult Scheduler::take(RequestId id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) throw std::logic_error(fmt::format("take: unknown request {}", id));
  if (!it->second->finished) throw std::logic_error(fmt::format("take: request {} has not finished", id));
  RequestResult out = std::move(it->second->result);
  reqs_.erase(it);
  return out;
}

void Scheduler::retire(Seq& s) {
  if (s.done) return;
  s.done = true;
  if (s.kv >= 0 && !s.borrowed) runner_.kv().seq_free(s.kv);
  if (!s.borrowed) s.kv = -1;
  running_.remove(&s);
  GenerateResult& res = s.req->result.choices[static_cast<size_t>(s.choice)];
  if (s.sampled) res.decode_ms = ms_between(s.t_first, Clock::now());
  if (--s.req->live == 0) finish_request(*s.req);
}

void Scheduler::finish_request(Req& r) {
  r.finished = true;
  std::erase(waiting_, &r);
  ++stats_.requests_finished;
  if (r.result.cancelled) ++stats_.requests_cancelled;
  if (r.result.timed_out) ++stats_.requests_timed_out;
}

void Scheduler::fail(Req& r, const std::string& why) {
  if (r.result.error.empty()) r.result.error = why;
  for (auto& s : r.seqs) {
    if (s->done) continue;
    GenerateResult& res = r.result.choices[static_cast<size_t>(s->choice)];
    if (res.stop_reason.empty()) res.stop_reason = "error";
    s->sink->finish();
    retire(*s);
  }
}

// Requests enter as their first sequence; a preempted sequence re-enters the same way, carrying
// the tokens to recompute.
bool Scheduler::admit(Req& r) {
  KvCache& kv = runner_.kv();
  for (auto& sp : r.seqs) {
    Seq& s = *sp;
    if (s.done || std::find(running_.begin(), running_.end(), &s) != running_.end()) continue;
    // A request not forked yet needs the slots of all its choices; running ones not forked yet
    // hold theirs.
    int32_t reserved = 0;
    for (const Seq* q : running_)
      if (!q->req->forked) reserved += q->req->r.n_choices - 1;
    const int32_t slots = r.forked ? 1 : r.r.n_choices;
    if (static_cast<int32_t>(running_.size()) + reserved + slots > n_parallel_) return false;
    const bool fresh_kv = s.kv < 0;
    if (kv.n_seq() + reserved + (fresh_kv ? slots : slots - 1) > kv.n_seq_max()) return false;
    // A new sequence first takes what the prefix cache holds of its tokens; that is undone when
    // it cannot start now.
    int32_t hit = 0;
    if (fresh_kv) {
      s.kv = kv.seq_new();
      if (prefix_cache_ && r.r.cache_prompt) hit = reuse_prefix(s);
    }
    auto undo = [&] {
      if (!fresh_kv) return;
      s.pending.insert(s.pending.begin(), s.history.begin(), s.history.end());
      s.history.clear();
      s.n_hashed = 0;
      s.last_hash = kRootHash;
      kv.seq_free(s.kv);
      s.kv = -1;
    };
    const int32_t have = kv.seq_len(s.kv);
    const int32_t need =
        static_cast<int32_t>((have + static_cast<int64_t>(s.pending.size()) + kv.block_size() - 1) / kv.block_size()) -
        static_cast<int32_t>(kv.seq_blocks(s.kv).size());
    // Headroom of one block per running sequence, so admitting does not force a preemption.
    if (!running_.empty() && need > kv.pool().n_free() - static_cast<int32_t>(running_.size())) {
      undo();
      return false;
    }
    if (need > kv.pool().n_free()) {
      undo();
      fail(r, fmt::format("the KV pool has {} free blocks of {} tokens but the prompt needs {}; use -c to raise it",
                          kv.pool().n_free(), kv.block_size(), need));
      return true;
    }
    stats_.cached_tokens += hit;
    if (!s.sampled) r.result.choices[static_cast<size_t>(s.choice)].n_prompt_cached += hit;
    s.t_admit = Clock::now();
    running_.push_back(&s);
  }
  return true;
}

// Appends to s (new, empty) the cached blocks that hold its leading tokens, moving those tokens
// from pending to history. Whole blocks only, and never the last token (its logits are needed).
// Returns the tokens reused.
int32_t Scheduler::reuse_prefix(Seq& s) {
  KvCache& kv = runner_.kv();
  const int32_t bs = kv.block_size();
  const auto usable = static_cast<int32_t>((s.pending.size() - 1) / static_cast<size_t>(bs));
  int32_t n = 0;
  uint64_t h = kRootHash;
  for (; n < usable; ++n) {
    const uint64_t next = block_hash(h, s.pending.data() + static_cast<size_t>(n) * static_cast<size_t>(bs), bs);
    if (!kv.seq_append_cached(s.kv, next)) break;
    h = next;
  }
  if (n == 0) return 0;
  const auto cut = s.pending.begin() + static_cast<std::ptrdiff_t>(n) * bs;
  s.history.assign(s.pending.begin(), cut);
  s.pending.erase(s.pending.begin(), cut);
  s.n_hashed = n;
  s.last_hash = h;
  return n * bs;
}

// Registers the blocks of s that became full since the last call.
void Scheduler::register_blocks(Seq& s) {
  if (!prefix_cache_ || s.borrowed || s.kv < 0) return;
  KvCache& kv = runner_.kv();
  const auto bs = static_cast<size_t>(kv.block_size());
  while (static_cast<size_t>(s.n_hashed + 1) * bs <= s.history.size()) {
    s.last_hash = block_hash(s.last_hash, s.history.data() + static_cast<size_t>(s.n_hashed) * bs, static_cast<int32_t>(bs));
    kv.set_block_hash(s.kv, s.n_hashed, s.last_hash);  // false: another block holds it; fine
    ++s.n_hashed;
  }
}

// The most recently admitted sequence other than `needy` that may be recomputed goes back to the
// head of the queue.
bool Scheduler::preempt_for(const Seq& needy) {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    Seq& v = **it;
    if (&v == &needy || v.borrowed) continue;
    std::vector<int32_t> redo = v.history;
    redo.insert(redo.end(), v.pending.begin(), v.pending.end());
    if (v.next >= 0) redo.push_back(v.next);
    runner_.kv().seq_free(v.kv);
    v.kv = -1;
    v.history.clear();
    v.n_hashed = 0;
    v.last_hash = kRootHash;
    v.pending = std::move(redo);
    v.next = -1;
    running_.erase(std::next(it).base());
    if (std::find(waiting_.begin(), waiting_.end(), v.req) == waiting_.end()) waiting_.push_front(v.req);
    ++stats_.preemptions;
    return true;
  }
  return false;
}

std::vector<Scheduler::Seq*> Scheduler::start_choices(Req& r, Seq& parent) {
  r.forked = true;
  std::vector<Seq*> kids;
  for (int32_t c = 1; c < r.r.n_choices; ++c) {
    auto s = std::make_unique<Seq>();
    s->req = &r;
    s->choice = c;
    s->kv = runner_.kv().seq_fork(parent.kv);
    s->history = parent.history;
    s->n_hashed = parent.n_hashed;
    s->last_hash = parent.last_hash;
    s->own_sampler = std::make_unique<Sampler>(parent.sampler->fork());
    s->sampler = s->own_sampler.get();
    GenerateResult& res = r.result.choices[static_cast<size_t>(c)];
    res.prompt_ids = r.r.prompt;
    res.n_prompt_eval = 0;
    Req* rp = &r;
    s->text_cb = [rp, c](std::string_view text) {
      if (rp->r.on_text) rp->r.on_text(c, text);
    };
    s->sink = std::make_unique<TokenSink>(tok_, *s->sampler, r.r.params, res, s->text_cb);
    s->t_admit = parent.t_admit;
    running_.push_back(s.get());
    kids.push_back(s.get());
    r.seqs.push_back(std::move(s));
    ++r.live;
  }
  return kids;
}

// Commits a sampled token; false when the sequence is done.
bool Scheduler::commit(Seq& s, int32_t token, std::span<const float> row) {
  GenerateResult& res = s.req->result.choices[static_cast<size_t>(s.choice)];
  if (!s.sampled) {
    s.sampled = true;
    s.t_first = Clock::now();
    res.prefill_ms = ms_between(s.t_admit, s.t_first);
  }
  ++stats_.generated_tokens;
  const int32_t n_lp = s.req->r.n_logprobs;
  if (n_lp >= 0) res.logprobs.push_back(token_logprob(row, token, n_lp));
  const bool more = s.sink->push(token);
  if (s.req->r.on_token) s.req->r.on_token(s.choice, token, n_lp >= 0 ? &res.logprobs.back() : nullptr);
  if (!more) return false;
  if (runner_.kv().seq_len(s.kv) + 1 > runner_.kv().n_ctx_seq()) {
    res.stop_reason = "context";
    return false;
  }
  s.next = token;
  return true;
}

// Ends a request before it finished: cancelled (nothing more is streamed) or past its deadline
// (held-back text is flushed: what was generated stands).
void Scheduler::end_early(Req& r, bool timeout) {
  if (timeout) r.result.timed_out = true;
  else r.result.cancelled = true;
  for (auto& s : r.seqs) {
    if (s->done) continue;
    GenerateResult& res = r.result.choices[static_cast<size_t>(s->choice)];
    if (res.stop_reason.empty()) res.stop_reason = timeout ? "timeout" : "cancelled";
    if (timeout) s->sink->finish();
    retire(*s);
  }
}

bool Scheduler::step() {
  // Cancelled requests and those past their deadline retire first.
  const auto now = Clock::now();
  for (auto& [id, r] : reqs_) {
    if (r->finished) continue;
    if (r->cancel) end_early(*r, false);
    else if (r->r.deadline && now >= *r->r.deadline) end_early(*r, true);
  }
  while (!waiting_.empty()) {
    Req* r = waiting_.front();
    if (!admit(*r)) break;
    if (!waiting_.empty() && waiting_.front() == r) waiting_.pop_front();  // (a failed one is gone already)
  }
  if (running_.empty()) {
    if (waiting_.empty()) return false;
    // Nothing runs and the head of the queue cannot start: blocks are held outside the scheduler.
    fail(*waiting_.front(), fmt::format("the KV pool has {} free blocks, too few for the prompt (other sequences hold "
                                        "the rest); use -c to raise it",
                                        runner_.kv().pool().n_free()));
    return true;
  }

  KvCache& kv = runner_.kv();
  std::vector<BatchToken> batch;
  std::vector<Seq*> row_seq;                       // the sequence of each logits row
  std::vector<std::pair<Seq*, int32_t>> fed;       // tokens fed per sequence this step
  for (;;) {
    batch.clear();
    row_seq.clear();
    fed.clear();
    int32_t free = kv.pool().n_free();
    int32_t budget = n_batch_;
    bool starved = false;
    for (Seq* s : running_) {
      if (s->next < 0) continue;
      const int32_t need = kv.blocks_needed(s->kv, 1);
      if (need > free) {
        starved = true;
        if (preempt_for(*s)) break;
        // Alone (or with borrowed sequences only) and out of blocks.
        s->req->result.choices[static_cast<size_t>(s->choice)].stop_reason = "kv_full";
        s->sink->finish();
        retire(*s);
        break;
      }
      free -= need;
      batch.push_back({s->kv, s->next, true});
      row_seq.push_back(s);
      fed.emplace_back(s, 1);
      --budget;
    }
    if (starved) continue;  // the running set changed: plan again
    for (Seq* s : running_) {
      if (s->pending.empty() || budget == 0) continue;
      auto n = std::min<int32_t>(budget, static_cast<int32_t>(s->pending.size()));
      while (n > 0 && kv.blocks_needed(s->kv, n) > free) n = kv.blocks_needed(s->kv, 1) > free ? 0 : n / 2;
      if (n == 0) continue;
      free -= kv.blocks_needed(s->kv, n);
      const bool completes = n == static_cast<int32_t>(s->pending.size());
      for (int32_t i = 0; i < n; ++i) batch.push_back({s->kv, s->pending[static_cast<size_t>(i)], completes && i + 1 == n});
      if (completes) row_seq.push_back(s);
      fed.emplace_back(s, n);
      budget -= n;
    }
    if (!batch.empty()) break;
    if (running_.empty()) return true;
    // Every running sequence is prefilling and the pool is full: recompute the newest later.
    if (!preempt_for(*running_.front())) {
      fail(*running_.front()->req, "the KV pool is exhausted by sequences outside the scheduler; use -c to raise it");
      return true;
    }
  }

  stats_.plan_s += std::chrono::duration<double>(Clock::now() - now).count();
  const std::span<const float> logits = runner_.decode(batch);
  ++stats_.steps;
  stats_.max_batch_rows = std::max<int64_t>(stats_.max_batch_rows, static_cast<int64_t>(batch.size()));
  for (auto [s, n] : fed) {
    if (s->next >= 0) {
      s->history.push_back(s->next);
      s->next = -1;
      continue;
    }
    s->history.insert(s->history.end(), s->pending.begin(), s->pending.begin() + n);
    s->pending.erase(s->pending.begin(), s->pending.begin() + n);
    if (!s->sampled) {
      stats_.prompt_tokens += n;
      s->req->result.choices[static_cast<size_t>(s->choice)].n_prompt_eval += n;
    }
  }
  for (auto [s, n] : fed) register_blocks(*s);
  const auto n_vocab = static_cast<size_t>(runner_.n_vocab());
  std::vector<Seq*> ended;
  std::vector<Pick> picks;
  std::vector<Seq*> picked;  // the sequence of each pick
  for (size_t i = 0; i < row_seq.size(); ++i) {
    Seq& s = *row_seq[i];
    const std::span<const float> row = logits.subspan(i * n_vocab, n_vocab);
    Req& r = *s.req;
    if (!s.sampled && r.r.params.n_predict == 0) {  // prefill only, as llama.cpp's -n 0
      r.result.choices[static_cast<size_t>(s.choice)].stop_reason = "length";
      ended.push_back(&s);
      continue;
    }
    // The other choices fork from this row (their samplers fork from this one's RNG before it
    // draws) and sample from it too.
    if (!s.sampled && !r.forked && r.r.n_choices > 1)
      for (Seq* kid : start_choices(r, s)) {
        picks.push_back({kid->sampler, row});
        picked.push_back(kid);
      }
    picks.push_back({s.sampler, row});
    picked.push_back(&s);
  }
  const auto t_sample = Clock::now();
  sample_rows(picks, sample_pool_, n_parallel_);
  const auto t_commit = Clock::now();
  stats_.sample_s += std::chrono::duration<double>(t_commit - t_sample).count();
  for (size_t i = 0; i < picks.size(); ++i)
    if (!commit(*picked[i], picks[i].token, picks[i].row)) ended.push_back(picked[i]);
  for (Seq* s : ended) {
    s->sink->finish();
    retire(*s);
  }
  stats_.commit_s += std::chrono::duration<double>(Clock::now() - t_commit).count();
  return true;
}

void Scheduler::run() {
  while (step()) {
  }
}

}  // namespace minfer
