// Token sampling from logits: penalties, top-k, top-p, min-p, temperature, seeded draw.
//
// The stage order and semantics are llama.cpp's default sampler chain (common/sampling.cpp,
// src/llama-sampling.cpp): penalties -> top-k -> top-p -> min-p -> temperature -> softmax -> draw.
// Note that top-p and min-p see the temperature-1 distribution, as in llama.cpp.
// Defaults are llama.cpp's (common.h `common_params_sampling`).
//
// Every stage is a free function over a Candidates array so it can be tested alone. Sampler gives
// the same result as running them in order (a test checks this) but fuses them so that a
// 152k-entry vocabulary costs about one pass over the logits: penalties are applied to a copy of
// the logits, top-k is a single heap pass, min-p is a partition, and top-p only sorts the prefix
// it needs. It also keeps the penalty history and the random generator.
//
// Conventions:
//   - Logits: one float per vocabulary entry, index = token id. NaN and +inf are rejected with
//     std::invalid_argument naming the index; -inf is accepted and means "masked" (probability 0);
//     all entries -inf is rejected (nothing can be sampled).
//   - Ties in a ranking (top-k cut, greedy argmax, sort order) are broken by token id, the lower id
//     first, so results never depend on sort stability.
//   - No stage ever leaves the candidate set empty (top-p and min-p keep at least `min_keep`).
//   - RNG: std::mt19937_64 seeded with `seed` (its output sequence is fixed by the C++ standard, so
//     a seed gives the same tokens on every platform). A draw takes one 64-bit output, keeps its top
//     53 bits as u in [0, 1), and picks the first candidate (in probability order) whose cumulative
//     probability exceeds u * total.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace minfer {

/// The seed value that asks for a random seed (std::random_device), like llama.cpp's
/// LLAMA_DEFAULT_SEED.
inline constexpr uint64_t kSeedRandom = UINT64_MAX;

struct SamplerParams {
  float temp = 0.8f;              ///< <= 0: greedy (argmax after penalties)
  int32_t top_k = 40;             ///< <= 0: disabled
  float top_p = 0.95f;            ///< >= 1: disabled
  float min_p = 0.05f;            ///< <= 0: disabled; keeps p >= min_p * p_max
  float repeat_penalty = 1.0f;    ///< 1: disabled; must be > 0
  int32_t repeat_last_n = 64;     ///< history window of all penalties; 0: disabled, -1: unlimited
  float presence_penalty = 0.0f;  ///< subtracted once from a token seen in the window
  float frequency_penalty = 0.0f; ///< subtracted per occurrence in the window
  uint64_t seed = kSeedRandom;
};

struct TokenCandidate {
  int32_t id;
  float logit;
  float p;  ///< valid after apply_softmax (and top-p), else 0
};
using Candidates = std::vector<TokenCandidate>;

/// One candidate per logit, in id order. Throws std::invalid_argument for an empty span, a NaN or
/// +inf entry (naming the index) or when every entry is -inf.
Candidates make_candidates(std::span<const float> logits);

/// llama.cpp penalties over the tokens in `recent` (the history window): for a token seen c > 0
/// times, logit <= 0 is multiplied by `repeat_penalty` and logit > 0 divided by it, then
/// c * frequency_penalty + presence_penalty is subtracted. Unseen tokens are unchanged. Ids in
/// `recent` that are not candidates are ignored.
void apply_penalties(Candidates& c, std::span<const int32_t> recent, float repeat_penalty,
                     float frequency_penalty, float presence_penalty);

/// Keeps the k highest logits (ties: lower id), sorted by descending logit. k <= 0 or k >= size:
/// no change.
void apply_top_k(Candidates& c, int32_t k);

/// Nucleus: sorts, computes softmax, keeps the shortest prefix whose probability sum reaches `p`
/// (at least `min_keep`). p >= 1: no change. Leaves `p` fields set (renormalized only by
/// apply_softmax).
void apply_top_p(Candidates& c, float p, size_t min_keep = 1);

/// Keeps candidates with probability >= p * max probability (at least `min_keep`, the best
/// first). p <= 0: no change.
void apply_min_p(Candidates& c, float p, size_t min_keep = 1);

/// Divides logits by `t`. t <= 0 keeps only the best candidate (ties: lower id).
void apply_temperature(Candidates& c, float t);

/// Sorts by descending logit (ties: lower id) and sets p = softmax(logit) (computed in double).
void apply_softmax(Candidates& c);

/// The candidate picked by `u` in [0, 1) from softmaxed, sorted candidates (see the file comment).
int32_t pick_candidate(const Candidates& c, double u);

/// Index of the largest logit, the lowest index on ties. Validates like make_candidates.
int32_t argmax(std::span<const float> logits);

/// The log-probability of a token under the model's own distribution — log-softmax of the raw
/// logits at temperature 1, before penalties and filters (what OpenAI's `logprobs` report) — and
/// the most likely alternatives.
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;                           ///< -inf for a masked (-inf) logit
  std::vector<std::pair<int32_t, float>> top;  ///< (id, logprob), most likely first, ties: lower id
};

/// `id`'s entry with the `n_top` (>= 0) most likely tokens, computed in double over the whole
/// vocabulary (one pass for the log-sum-exp, a partial sort for the top). Validates like
/// make_candidates; throws std::out_of_range for an id outside the logits.
TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int32_t n_top);

/// Not thread-safe: sample() advances the RNG and the filters use a scratch buffer.
class Sampler {
 public:
  /// Throws std::invalid_argument for NaN parameters or repeat_penalty <= 0.
  explicit Sampler(const SamplerParams& params = {});

  /// Samples one token id from `logits` (size n_vocab). Uses exactly one RNG output (none in
  /// greedy mode): pick_candidate over the kept candidates sorted by logit when at most
  /// kSortedPickMax remain, else over them unsorted (vocabulary order when no filter is on, as
  /// with OpenAI's defaults): the same distribution without sorting the whole vocabulary, which
  /// cost ~20 ms a token at 152k entries;
  /// does not add the token to the penalty history — call accept() for the token actually used.
  int32_t sample(std::span<const float> logits);

  /// The distribution sample() draws from, over the full vocabulary (size logits.size()): zeros for
  /// removed tokens; one-hot at the argmax in greedy mode. Does not advance the RNG. Used by
  /// speculative decoding's rejection sampling.
  std::vector<float> probs(std::span<const float> logits) const;

  /// Draws an index from an explicit distribution `p` (non-negative, finite, positive sum; need not
  /// be normalized), e.g. the residual max(0, p_target - p_draft). Throws std::invalid_argument
  /// otherwise. Advances the RNG.
  int32_t sample_probs(std::span<const float> p);

  /// Next uniform number in [0, 1) from the sampler's RNG (for acceptance tests).
  double uniform();

  /// Adds a token to the penalty history.
  void accept(int32_t token);

  /// Clears the history and restarts the RNG from the seed.
  void reset();

  /// A copy with the same parameters and penalty history but its own random stream, seeded by
  /// one draw of this sampler's RNG (which advances). Speculative decoding drafts with a fork:
  /// the acceptance test needs random numbers independent of the ones the draft drew with.
  Sampler fork();

  /// The seed in use (the drawn one when params.seed was kSeedRandom).
  /// sample() sorts the kept candidates when at most this many remain.
  static constexpr size_t kSortedPickMax = 1024;

  uint64_t seed() const { return seed_; }
  const SamplerParams& params() const { return params_; }
  bool greedy() const { return params_.temp <= 0.0f; }

 private:
  /// Penalties, filters, temperature, softmax. sorted: by descending logit (probs(), the staged
  /// chain's order); else sorted only when at most kSortedPickMax candidates are kept.
  Candidates filtered(std::span<const float> logits, bool sorted = true) const;

  SamplerParams params_;
  /// A buffer, not state: a copy of the sampler (speculative decoding copies it every round)
  /// starts with an empty one instead of copying a vocabulary-sized vector.
  struct Scratch {
    std::vector<float> v;
    Scratch() = default;
    Scratch(const Scratch&) {}
    Scratch& operator=(const Scratch&) { return *this; }
  };
  mutable Scratch scratch_;  ///< penalized copy of the logits
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
};

}  // namespace minfer
