// Speculative decoding (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
// Decoding"; Chen et al. 2023, "Accelerating LLM Decoding with Speculative Sampling").
//
// A small draft model proposes d tokens one at a time; the target model scores all of them in
// one batched forward pass of d + 1 tokens; the longest acceptable prefix is kept plus one token
// from the target, and both KV caches roll back past the rejected tokens. With greedy sampling
// the output is the target's own greedy output; with temperature > 0 the acceptance rule keeps
// the target's sampling distribution exactly (not the same tokens as plain sampling: the random
// numbers are drawn differently). The draft depth adapts to the acceptance rate.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace minfer {

struct SpeculativeParams {
  int32_t n_draft = 8;      ///< max tokens drafted per step
  int32_t n_draft_min = 1;  ///< min tokens drafted per step
  bool adaptive = true;     ///< grow the depth after a fully accepted draft, shrink after early rejections
};

struct SpeculativeStats {
  int64_t n_steps = 0;     ///< target verification passes
  int64_t n_drafted = 0;   ///< tokens proposed by the draft
  int64_t n_accepted = 0;  ///< drafted tokens accepted
  double acceptance() const { return n_drafted ? static_cast<double>(n_accepted) / static_cast<double>(n_drafted) : 0; }
};

/// The verdict on one draft: how many drafted tokens are accepted and the token that follows them.
struct DraftVerdict {
  int32_t n_accepted = 0;
  int32_t next = -1;
};

/// Speculative sampling's acceptance rule. p[i] (i = 0..d) are the target's distributions after
/// the accepted prefix of length i, q[i] (i = 0..d-1) the draft's distributions that `drafted[i]`
/// was drawn from. Token i is accepted with probability min(1, p[i][x] / q[i][x]); at the first
/// rejection the next token is drawn from normalize(max(0, p[i] - q[i])); when all d are accepted
/// it is drawn from p[d]. Random numbers come from `rng`. For one-hot (greedy) distributions this
/// accepts exactly the drafted tokens that equal the target's argmax.
DraftVerdict verify_draft(std::span<const std::vector<float>> p, std::span<const std::vector<float>> q,
                          std::span<const int32_t> drafted, Sampler& rng);

class SpeculativeDecoder {
 public:
  /// `target` and `draft` must use the same vocabulary (same ids for the same tokens) and start
  /// empty or holding the same tokens.
  SpeculativeDecoder(Session& target, Session& draft, const SpeculativeParams& p = {});

  /// Like generate(): evaluates the prompt on both models, then decodes speculatively.
  GenerateResult generate(const tokenizer::Tokenizer& tok, Sampler& sampler, std::span<const int32_t> prompt,
                          const GenerateParams& params, const std::function<void(std::string_view)>& on_text = nullptr);

  const SpeculativeStats& stats() const { return stats_; }

 private:
  Session& target_;
  Session& draft_;
  SpeculativeParams params_;
  SpeculativeStats stats_;
};

}  // namespace minfer
