#include "runtime/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace minfer {

Session::Session(const Model& model, Backend& backend, const SessionParams& p)
    : owned_(std::make_unique<ModelRunner>(model, backend, p)), runner_(owned_.get()), seq_(runner_->kv().seq_new()) {}

Session::Session(ModelRunner& runner) : runner_(&runner), seq_(runner.kv().seq_new()) {}

Session::~Session() {
  if (runner_->kv().seq_exists(seq_)) runner_->kv().seq_free(seq_);
}

std::span<const float> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) throw std::invalid_argument("eval: no tokens");
  const int64_t need = static_cast<int64_t>(n_past()) + static_cast<int64_t>(tokens.size());
  if (need > n_ctx())
    throw ContextFullError(fmt::format("the sequence needs {} positions ({} evaluated + {} new) but the context holds {} "
                                       "(n_ctx); use -c to raise it",
                                       need, n_past(), tokens.size(), n_ctx()));
  const auto n_vocab = static_cast<size_t>(runner_->n_vocab());
  for (int32_t t : tokens)
    if (t < 0 || static_cast<size_t>(t) >= n_vocab)
      throw std::invalid_argument(fmt::format("token id {} outside the vocabulary [0, {})", t, n_vocab));
  if (runner_->kv().blocks_needed(seq_, static_cast<int32_t>(tokens.size())) > runner_->kv().pool().n_free())
    throw KvPoolFullError(fmt::format("KV cache: {} more tokens do not fit the pool ({} of {} blocks free); use -c to "
                                      "raise it",
                                      tokens.size(), runner_->kv().pool().n_free(), runner_->kv().n_blocks()));
  logits_.resize(all_logits ? tokens.size() * n_vocab : n_vocab);
  const auto step = static_cast<size_t>(runner_->n_batch());
  for (size_t i = 0; i < tokens.size(); i += step) {
    const size_t n = std::min(tokens.size() - i, step);
    const bool last = i + n == tokens.size();
    batch_.clear();
    for (size_t j = 0; j < n; ++j) batch_.push_back({seq_, tokens[i + j], all_logits || (last && j + 1 == n)});
    const std::span<const float> out = runner_->decode(batch_);
    if (all_logits) std::memcpy(logits_.data() + i * n_vocab, out.data(), out.size_bytes());
    else if (last) std::memcpy(logits_.data(), out.data(), out.size_bytes());
  }
  return logits_;
}

}  // namespace minfer
