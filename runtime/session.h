// Session: one token sequence evaluated by a model on a backend, with its KV cache.
//
// eval() runs the forward pass over new tokens at positions n_past, n_past + 1, ... in ubatches
// of at most n_batch tokens, and returns logits. A graph is built, lowered and allocated once per
// shape (tokens, logit rows) and kept: the next step with that shape only writes its inputs and
// computes, so decode pays no host-side graph work, and a CUDA backend replays its captured graph.
// rollback() forgets the last tokens (speculative decoding's rejection).
#pragma once

#include <list>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "ops/executor.h"
#include "runtime/kv_cache.h"
#include "runtime/model.h"

namespace minfer {

/// The sequence does not fit the context: the message gives both lengths and suggests -c.
class ContextFullError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SessionParams {
  int32_t n_ctx = 0;          ///< 0: the model's context_length, capped by kv_budget_bytes
  int32_t n_batch = 512;      ///< max tokens per forward pass (ubatch)
  DType kv_type = DType::F16;
  size_t kv_budget_bytes = size_t{4} << 30;  ///< cap for the default n_ctx
};

class Session {
 public:
  /// Allocates the KV cache and reserves the arena for a full ubatch (so an impossible context
  /// fails here with OutOfMemoryError, not mid-generation).
  Session(const Model& model, Backend& backend, const SessionParams& p = {});

  /// Evaluates `tokens` after the current sequence. Returns logits [n_vocab] of the last token,
  /// or [tokens.size() * n_vocab] (row per token) when all_logits. Throws ContextFullError when
  /// n_past + tokens.size() > n_ctx (nothing is evaluated then) and std::invalid_argument for an
  /// empty span or a token id outside the vocabulary.
  std::span<const float> eval(std::span<const int32_t> tokens, bool all_logits = false);

  int32_t n_past() const { return kv_.n_past(); }
  int32_t n_ctx() const { return kv_.n_ctx(); }
  int32_t n_vocab() const { return model_.hparams().n_vocab; }
  /// Forgets tokens from position n on (n <= n_past).
  void rollback(int32_t n);
  void reset() { rollback(0); }

  const Model& model() const { return model_; }
  Backend& backend() const { return backend_; }
  KvCache& kv() { return kv_; }
  Executor& executor() { return exec_; }

  /// The n_ctx a session would use for `model` under `p` (resolves 0).
  static int32_t resolve_n_ctx(const Model& model, const SessionParams& p);

 private:
  // A built, lowered and allocated forward graph for one (tokens, logit rows) shape.
  struct StepGraph {
    int64_t n_tokens = 0, n_out = 0;
    std::unique_ptr<Context> ctx;
    Graph graph;
    Batch batch;
    Tensor* logits = nullptr;
    uint64_t arena_generation = 0;
  };
  // Speculative decoding alone uses up to 9 shapes per session (the prompt, verify batches of 1..8).
  static constexpr size_t kMaxStepGraphs = 16;

  StepGraph& step_graph(int64_t n_tokens, int64_t n_out);
  void eval_ubatch(std::span<const int32_t> tokens, bool all_logits, float* out);

  const Model& model_;
  Backend& backend_;
  SessionParams params_;
  KvCache kv_;
  Executor exec_;
  std::list<StepGraph> graphs_;  // most recently used first
  std::vector<float> logits_;
};

}  // namespace minfer
