// ModelRunner: one forward pass over a batch of tokens from any number of sequences.
//
// The runner owns the paged KV cache (runtime/kv_cache.h) and the graphs: each batch is padded to
// a bucketed shape (tokens, logit rows), and the graph of each shape is built, lowered and
// allocated once and kept, so a decode step only writes its inputs (tokens, positions, sequence
// ids, cells, logit rows) and computes — and a CUDA backend replays its captured graph — at any
// depth and for any mix of sequences. Padding rows belong to the KV cache's null sequence: they
// store into the null block and read only from it.
//
// Everything above it — Session (one sequence), the Scheduler (many, continuous batching),
// perplexity, speculative decoding, the benches — evaluates tokens through decode().
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "ops/executor.h"
#include "runtime/kv_cache.h"
#include "runtime/model.h"

namespace minfer {

class Collective;

struct RunnerParams {
  /// KV pool cells over all sequences (-c). 0: the model's context_length times n_seq_max,
  /// capped by kv_budget_bytes.
  int32_t n_ctx = 0;
  int32_t n_batch = 512;   ///< max tokens per forward pass (the ubatch)
  /// Logit rows the measure pass reserves for (0: n_batch, every row of a full ubatch). A later
  /// pass that asks for more grows the arena then; programs that never need many rows (prefill
  /// benchmarks, generation) set it low so a long ubatch does not reserve n_batch * n_vocab floats.
  int32_t n_out_max = 0;
  int32_t n_seq_max = 1;   ///< sequences that may exist at once
  /// Tokens one sequence may hold: 0 means n_ctx for a single sequence, else
  /// min(n_ctx, context_length).
  int32_t n_ctx_seq = 0;
  int32_t block_size = 32;  ///< KV cells per block (docs/perf/*-paged-kv.md says why 32)
  DType kv_type = DType::F16;
  size_t kv_budget_bytes = size_t{4} << 30;  ///< cap for the default n_ctx
};

/// One token of a batch: appended to sequence `seq` at its next position.
struct BatchToken {
  int32_t seq = 0;
  int32_t token = 0;
  bool logits = false;  ///< return this row's logits
};

/// Where decode() spends its time, summed over calls (seconds of host wall time).
struct RunnerTimes {
  double graph_s = 0;    ///< finding (or building and allocating) the step graph of the shape
  double compute_s = 0;  ///< inputs uploaded, graph computed, device synchronized
  double logits_s = 0;   ///< logits rows copied back to the host
};

class ModelRunner {
 public:
  /// Allocates the KV cache and reserves the arena for a full ubatch with every row's logits (so
  /// an impossible configuration fails here with OutOfMemoryError, not mid-generation). Throws
  /// std::invalid_argument for bad params.
  ModelRunner(const Model& model, Backend& backend, const RunnerParams& p = {});
  /// Tensor parallelism (docs/tensor-parallel.md): ranks[r] is rank r's part of one model
  /// (models::load with Shard{r, n}) on its own backend, every backend joined to `group` as rank
  /// r (Backend::join). Each forward runs on all ranks at once (a thread each); the KV cache keeps
  /// each rank's heads on its backend under one bookkeeping; logits come from rank 0. Throws
  /// std::invalid_argument when the ranks do not form one group.
  ModelRunner(const std::vector<const Model*>& ranks, std::shared_ptr<Collective> group, const RunnerParams& p = {});
  ~ModelRunner();

  /// Evaluates `batch` (1 .. n_batch tokens). Each token is appended to its sequence: the tokens
  /// of one sequence take its next positions in batch order. Returns the logits of the rows with
  /// `logits` set, in batch order: f32 [n_logits * n_vocab], valid until the next call. All or
  /// nothing: throws KvPoolFullError / ContextFullError naming the sequence that does not fit,
  /// std::invalid_argument for an empty or oversized batch, a token id outside the vocabulary or a
  /// sequence that does not exist — and then no sequence has changed.
  std::span<const float> decode(std::span<const BatchToken> batch);

  /// Runs the decode shapes of 1 .. n_rows rows (one token per sequence, every row's logits;
  /// each bucket twice, so a CUDA backend captures its graph) and one full ubatch of one sequence,
  /// on sequences of its own that it frees again, so the first requests do not pay for building,
  /// capturing and loading kernels (what llama-server's warm-up does). n_rows is capped by the
  /// free sequence slots and free blocks, the ubatch by what one sequence and the free cells
  /// hold; the blocks are used and released (a prefix cache loses its least recently used blocks
  /// to it). times() does not count it. Throws what decode() throws (out of memory, a device
  /// error), after freeing its sequences.
  void warmup(int32_t n_rows);

  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }
  const RunnerTimes& times() const { return times_; }
  /// Rank 0's model, backend and executor (the only ones without tensor parallelism).
  const Model& model() const { return *ranks_.front().model; }
  Backend& backend() const { return *ranks_.front().backend; }
  Executor& executor() { return *ranks_.front().exec; }
  int n_ranks() const { return static_cast<int>(ranks_.size()); }
  const RunnerParams& params() const { return params_; }
  int32_t n_batch() const { return params_.n_batch; }
  int32_t n_vocab() const { return model().hparams().n_vocab; }

  /// The padded size a batch of n rows runs at: exact up to 16 (the decode kernels' rows), then
  /// multiples of 16.
  static int64_t bucket(int64_t n);
  /// The pool size a runner would use for `model` under `p` (resolves n_ctx = 0).
  static int32_t resolve_n_ctx(const Model& model, const RunnerParams& p);

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
  static constexpr size_t kMaxStepGraphs = 64;

  // One rank's model, backend, executor and graphs (one rank without tensor parallelism).
  struct Rank {
    const Model* model = nullptr;
    Backend* backend = nullptr;
    std::unique_ptr<Executor> exec;
    std::list<StepGraph> graphs;  // most recently used first
  };

  ModelRunner(const std::vector<const Model*>& ranks, const std::vector<Backend*>& backends,
              std::shared_ptr<Collective> group, const RunnerParams& p);
  StepGraph& step_graph(Rank& rank, int64_t n_tokens, int64_t n_out);
  // Uploads the staged inputs into each rank's graph, computes them all (rank 0 on this thread)
  // and reads rank 0's n_logits logit rows; the first rank's error is rethrown after every rank
  // has stopped.
  void compute_ranks(int64_t n_tokens, int64_t n_out, size_t n_logits);

  std::vector<Rank> ranks_;
  std::shared_ptr<Collective> group_;
  RunnerParams params_;
  KvCache kv_;
  // The logits rows of the last decode(): backend().alloc_host() memory (pinned on CUDA, so the
  // download is one DMA), grown when a batch asks for more rows.
  std::shared_ptr<void> logits_mem_;
  size_t logits_cap_ = 0;  // floats
  std::span<const float> logits_;
  RunnerTimes times_;
  std::vector<int32_t> tokens_, pos_, seq_, cells_, rows_;  // staging for the inputs
};

}  // namespace minfer
