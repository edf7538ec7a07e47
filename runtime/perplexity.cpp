#include "runtime/perplexity.h"

#include <fmt/format.h>

#include <cmath>

namespace minfer {

PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens, int32_t max_chunks,
                            const std::function<void(int32_t, double)>& on_chunk) {
  const int32_t n_ctx = session.n_ctx();
  const int32_t n_vocab = session.n_vocab();
  int32_t n_chunks = static_cast<int32_t>(tokens.size() / static_cast<size_t>(n_ctx));
  if (n_chunks == 0)
    throw std::invalid_argument(fmt::format("perplexity: the text has {} tokens, fewer than one chunk of n_ctx = {}",
                                            tokens.size(), n_ctx));
  if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);
  const int32_t first = n_ctx / 2;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  PerplexityResult r;
  for (int32_t c = 0; c < n_chunks; ++c) {
    session.reset();
    auto chunk = tokens.subspan(static_cast<size_t>(c) * static_cast<size_t>(n_ctx), static_cast<size_t>(n_ctx));
    auto logits = session.eval(chunk, /*all_logits=*/true);
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + static_cast<size_t>(j) * static_cast<size_t>(n_vocab);
      float mx = row[0];
      for (int32_t v = 1; v < n_vocab; ++v) mx = std::max(mx, row[v]);
      double sum = 0;
      for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
      const int32_t next = chunk[static_cast<size_t>(j) + 1];
      const double lp = static_cast<double>(row[next] - mx) - std::log(sum);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    if (on_chunk) on_chunk(c, std::exp(nll / static_cast<double>(count)));
  }
  const double mean = nll / static_cast<double>(count);
  const double var = nll2 / static_cast<double>(count) - mean * mean;
  r.ppl = std::exp(mean);
  r.ppl_stderr = var > 0 && count > 1 ? r.ppl * std::sqrt(var / static_cast<double>(count - 1)) : 0;
  r.n_chunks = n_chunks;
  r.n_scored = count;
  return r;
}

}  // namespace minfer
