// Perplexity with llama.cpp's method (tools/perplexity): the text is split into non-overlapping
// chunks of n_ctx tokens; each chunk is evaluated from an empty cache and scored on its second
// half only (positions n_ctx/2 .. n_ctx-2 predict the next token), so every scored token has at
// least n_ctx/2 tokens of context. Chunks run as parallel sequences of one runner, as many per
// forward pass as its batch and sequence slots allow (llama.cpp's n_seq = n_batch / n_ctx); on the
// CPU the result is bit-identical to one chunk at a time (batch invariance).
#pragma once

#include <functional>
#include <span>

#include "runtime/model_runner.h"

namespace minfer {

struct PerplexityResult {
  double ppl = 0;        ///< exp(mean negative log-likelihood)
  double ppl_stderr = 0; ///< ppl * standard error of the mean NLL (llama.cpp's "+/-")
  int32_t n_chunks = 0;
  int64_t n_scored = 0;
};

/// Scores `tokens` in chunks of n_ctx tokens, at most `max_chunks` (<= 0: all), on `runner`
/// (which must have no sequences, and n_ctx <= its per-sequence context). `on_chunk(i,
/// running_ppl)` is called after each chunk, in order. `bos_id` >= 0 (a vocabulary with
/// add_bos_token): each chunk is evaluated with its first token replaced by BOS, as llama.cpp
/// does (that token is never scored, so the text is scored as given). Throws
/// std::invalid_argument when the text holds less than one chunk of tokens or n_ctx < 2 or n_ctx
/// exceeds the runner's context. A model with non-finite logits gives a non-finite ppl (callers
/// decide; minfer-perplexity exits 1).
PerplexityResult perplexity(ModelRunner& runner, std::span<const int32_t> tokens, int32_t n_ctx, int32_t max_chunks,
                            const std::function<void(int32_t, double)>& on_chunk = nullptr, int32_t bos_id = -1);

/// The runner parameters perplexity() runs fastest with for chunks of n_ctx tokens: as many
/// sequences as fit a batch of n_batch tokens (at least one), and a pool for exactly them.
RunnerParams perplexity_runner_params(int32_t n_ctx, int32_t n_batch, DType kv_type);

}  // namespace minfer
