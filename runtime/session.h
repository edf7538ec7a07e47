// Session: one token sequence of a model, evaluated through a ModelRunner.
//
// eval() appends tokens at positions n_past, n_past + 1, ... in ubatches of at most n_batch tokens
// and returns logits; rollback() forgets the last tokens (speculative decoding's rejection: the
// sequence's block table is truncated). A session either owns its runner (one sequence, the
// common case) or is one sequence of a runner shared with others.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/model_runner.h"

namespace minfer {

/// Parameters of a session that owns its runner.
using SessionParams = RunnerParams;

class Session {
 public:
  /// A runner of its own (the KV pool sized by p.n_ctx) holding this one sequence. Throws what
  /// ModelRunner's constructor throws.
  Session(const Model& model, Backend& backend, const SessionParams& p = {});
  /// A new sequence of `runner` (which must outlive the session). Throws std::runtime_error when
  /// the runner has no free sequence slot.
  explicit Session(ModelRunner& runner);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Evaluates `tokens` after the current sequence. Returns logits [n_vocab] of the last token,
  /// or [tokens.size() * n_vocab] (row per token) when all_logits. Throws ContextFullError when
  /// n_past + tokens.size() > n_ctx(), KvPoolFullError when the shared pool is exhausted (nothing
  /// is evaluated then), std::invalid_argument for an empty span or a token id outside the vocabulary.
  std::span<const float> eval(std::span<const int32_t> tokens, bool all_logits = false);

  int32_t n_past() const { return runner_->kv().seq_len(seq_); }
  /// The most tokens this sequence can hold.
  int32_t n_ctx() const { return runner_->kv().n_ctx_seq(); }
  int32_t n_vocab() const { return runner_->n_vocab(); }
  /// Forgets tokens from position n on (n <= n_past).
  void rollback(int32_t n) { runner_->kv().seq_truncate(seq_, n); }
  void reset() { rollback(0); }

  /// The KV sequence id (for the Scheduler and the runner).
  int32_t seq() const { return seq_; }
  ModelRunner& runner() { return *runner_; }
  const Model& model() const { return runner_->model(); }
  Backend& backend() const { return runner_->backend(); }
  KvCache& kv() { return runner_->kv(); }
  Executor& executor() { return runner_->executor(); }

 private:
  std::unique_ptr<ModelRunner> owned_;
  ModelRunner* runner_;
  int32_t seq_;
  std::vector<BatchToken> batch_;
  std::vector<float> logits_;
};

}  // namespace minfer
