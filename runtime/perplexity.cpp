#include "runtime/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace minfer {

RunnerParams perplexity_runner_params(int32_t n_ctx, int32_t n_batch, DType kv_type) {
  RunnerParams p;
  p.n_seq_max = std::max(1, n_batch / std::max(1, n_ctx));
  p.n_ctx = n_ctx * p.n_seq_max;
  p.n_ctx_seq = n_ctx;
  p.n_batch = std::max(n_batch, 1);
  p.kv_type = kv_type;
  return p;
}

PerplexityResult perplexity(ModelRunner& runner, std::span<const int32_t> tokens, int32_t n_ctx, int32_t max_chunks,
                            const std::function<void(int32_t, double)>& on_chunk, int32_t bos_id) {
  KvCache& kv = runner.kv();
  if (n_ctx < 2) throw std::invalid_argument(fmt::format("perplexity: n_ctx must be >= 2, got {}", n_ctx));
  if (n_ctx > kv.n_ctx_seq())
    throw std::invalid_argument(fmt::format("perplexity: chunks of {} tokens exceed the runner's context {}", n_ctx, kv.n_ctx_seq()));
  const auto n_vocab = static_cast<size_t>(runner.n_vocab());
  int32_t n_chunks = static_cast<int32_t>(tokens.size() / static_cast<size_t>(n_ctx));
  if (n_chunks == 0)
    throw std::invalid_argument(fmt::format("perplexity: the text has {} tokens, fewer than one chunk of n_ctx = {}",
                                            tokens.size(), n_ctx));
  if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);
  const int32_t first = n_ctx / 2;
  const int32_t per_pass = std::clamp(std::min(kv.n_seq_max(), kv.n_ctx() / n_ctx), 1, std::max(1, runner.n_batch() / n_ctx));
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<BatchToken> batch;
  std::vector<float> scored;  // logits of the scored rows of the chunks of one group
  for (int32_t c0 = 0; c0 < n_chunks; c0 += per_pass) {
    const int32_t nc = std::min(per_pass, n_chunks - c0);
    std::vector<int32_t> seqs;
    for (int32_t i = 0; i < nc; ++i) seqs.push_back(kv.seq_new());
    const auto rows_per_chunk = static_cast<size_t>(n_ctx - 1 - first);
    scored.assign(static_cast<size_t>(nc) * rows_per_chunk * n_vocab, 0.0f);
    // Feed the group's tokens in ubatches of n_batch, chunk after chunk.
    const int64_t total = static_cast<int64_t>(nc) * n_ctx;
    size_t out = 0;
    for (int64_t i0 = 0; i0 < total; i0 += runner.n_batch()) {
      const int64_t i1 = std::min<int64_t>(total, i0 + runner.n_batch());
      batch.clear();
      for (int64_t i = i0; i < i1; ++i) {
        const auto c = static_cast<int32_t>(i / n_ctx), j = static_cast<int32_t>(i % n_ctx);
        int32_t t = tokens[static_cast<size_t>(c0 + c) * static_cast<size_t>(n_ctx) + static_cast<size_t>(j)];
        if (j == 0 && bos_id >= 0) t = bos_id;  // every chunk starts as a prompt would
        batch.push_back({seqs[static_cast<size_t>(c)], t, j >= first && j < n_ctx - 1});
      }
      const std::span<const float> l = runner.decode(batch);
      std::copy(l.begin(), l.end(), scored.begin() + static_cast<std::ptrdiff_t>(out));
      out += l.size();
    }
    for (int32_t s : seqs) kv.seq_free(s);
    for (int32_t c = 0; c < nc; ++c) {
      auto chunk = tokens.subspan(static_cast<size_t>(c0 + c) * static_cast<size_t>(n_ctx), static_cast<size_t>(n_ctx));
      for (int32_t j = first; j < n_ctx - 1; ++j) {
        const float* row = scored.data() + (static_cast<size_t>(c) * rows_per_chunk + static_cast<size_t>(j - first)) * n_vocab;
        float mx = row[0];
        for (size_t v = 1; v < n_vocab; ++v) mx = std::max(mx, row[v]);
        double sum = 0;
        for (size_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
        const int32_t next = chunk[static_cast<size_t>(j) + 1];
        const double lp = static_cast<double>(row[next] - mx) - std::log(sum);
        nll -= lp;
        nll2 += lp * lp;
        ++count;
      }
      if (on_chunk) on_chunk(c0 + c, std::exp(nll / static_cast<double>(count)));
    }
  }
  PerplexityResult r;
  const double mean = nll / static_cast<double>(count);
  const double var = nll2 / static_cast<double>(count) - mean * mean;
  r.ppl = std::exp(mean);
  r.ppl_stderr = var > 0 && count > 1 ? r.ppl * std::sqrt(var / static_cast<double>(count - 1)) : 0;
  r.n_chunks = n_chunks;
  r.n_scored = count;
  return r;
}

}  // namespace minfer
