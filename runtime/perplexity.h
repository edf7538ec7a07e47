// Perplexity with llama.cpp's method (tools/perplexity): the text is split into non-overlapping
// chunks of n_ctx tokens; each chunk is evaluated from an empty cache and scored on its second
// half only (positions n_ctx/2 .. n_ctx-2 predict the next token), so every scored token has at
// least n_ctx/2 tokens of context.
#pragma once

#include <functional>
#include <span>

#include "runtime/session.h"

namespace minfer {

struct PerplexityResult {
  double ppl = 0;        ///< exp(mean negative log-likelihood)
  double ppl_stderr = 0; ///< ppl * standard error of the mean NLL (llama.cpp's "+/-")
  int32_t n_chunks = 0;
  int64_t n_scored = 0;
};

/// Scores `tokens` in chunks of session.n_ctx() tokens, at most `max_chunks` (<= 0: all).
/// `on_chunk(i, running_ppl)` is called after each chunk. Throws std::invalid_argument when the
/// text holds less than one chunk of tokens.
PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens, int32_t max_chunks,
                            const std::function<void(int32_t, double)>& on_chunk = nullptr);

}  // namespace minfer
