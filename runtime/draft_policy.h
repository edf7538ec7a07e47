// DraftPolicy: how many tokens to draft in the next speculative round.
//
// A cost model after Leviathan et al. 2023 ("Fast Inference from Transformers via Speculative
// Decoding", §3.1 and §3.4). Each drafted token is taken to be accepted with the same probability
// alpha, independently of the others (their i.i.d. assumption), so a round that drafts d tokens
// commits on average
//     E[tokens](d) = (1 - alpha^(d+1)) / (1 - alpha)     (d accepted at most, plus the target's own)
// and costs
//     cost(d) = d * t_draft + t_verify(d + 1)
// where t_draft is the wall time of one draft step and t_verify(n) that of a target pass over n
// tokens. choose() returns the d in [d_min, d_max] maximizing E[tokens](d) / cost(d), i.e. the
// expected committed tokens per second. d = 0 is plain decoding (one target pass, one token).
//
// What is measured:
//   - alpha: a Beta(prior_alpha * prior_weight, (1 - prior_alpha) * prior_weight) prior updated
//     with the Bernoulli trials a verdict reveals (k accepted drafts = k successes, then one failure
//     when k < d); all evidence is multiplied by `forget` before each round's update, so the
//     estimate follows the text (boilerplate drafts well, prose less so).
//   - t_draft: an exponential moving average (weight ema_weight on the new sample) of draft steps.
//   - t_verify(n): one such average per batch size n. An n never measured borrows from its nearest
//     measured neighbours, optimistically, so that it gets tried and then measured: from the
//     nearest m < n it takes t(m) (a pass over more tokens is not faster), from the nearest m > n
//     it takes t(m) * n / m (batching does not raise the cost per token), and it uses the larger of
//     the two, i.e. the tightest lower bound the measurements give.
//   The first sample of the draft step and of each verify size is dropped: it pays one-time costs
//   (a Session builds the graph of a new shape on first use, caches are cold) and, as the first
//   value of an average, would make that depth look slow for good.
//   Before anything is measured choose() returns max(1, d_min) (capped at d_max), so the first
//   rounds measure a draft step, a verify batch and acceptance.
//
// Plain decoding reveals nothing about alpha, so after `probe_every` consecutive choices of 0 the
// next choice is max(1, d_min) (a probe) whatever the model says. A probe is not cheap (the draft
// first catches up on every token committed since it last ran: draft prefill for each of them),
// so while probes keep failing to bring the depth back the interval doubles, up to probe_max; it
// returns to probe_every as soon as the model itself chooses d > 0. A probe is also skipped when
// even an optimistic acceptance, the posterior mean plus two posterior standard deviations,
// would not make any depth >= 1 beat plain decoding at the measured costs (a draft nearly as slow
// as the target): then no probe can pay, and its catch-up would be pure loss. A skipped probe ages
// the evidence by `forget` instead, so the bound widens over time.
//
// The class does no timing itself: callers time their own draft steps and verify passes and report
// them (seconds, any monotonic clock). Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace minfer {

struct DraftPolicyParams {
  int32_t d_min = 0;           ///< smallest depth choose() returns (0: plain decoding allowed)
  int32_t d_max = 15;          ///< largest depth choose() returns
  double prior_alpha = 0.5;    ///< prior mean of the per-token acceptance probability, in (0, 1)
  double prior_weight = 2.0;   ///< prior strength in pseudo-trials, > 0
  double forget = 0.95;        ///< evidence kept per observed round, in (0, 1]
  double ema_weight = 0.2;     ///< weight of a new timing sample, in (0, 1]
  int32_t probe_every = 16;    ///< consecutive d = 0 choices before a probe, >= 1
  int32_t probe_max = 256;     ///< the longest interval between probes after backing off, >= probe_every
};

class DraftPolicy {
 public:
  /// Throws std::invalid_argument naming the field for parameters outside their stated ranges
  /// (including d_min < 0 or d_min > d_max).
  explicit DraftPolicy(const DraftPolicyParams& p = {});

  /// The depth for the next round, in [d_min, d_max]. Counts d = 0 choices for probing (so call it
  /// once per round).
  int32_t choose();

  /// A round drafted `d` tokens and the target accepted the first `n_accepted` of them
  /// (0 <= n_accepted <= d). d = 0 rounds carry no evidence and are ignored. Throws
  /// std::invalid_argument for values out of range.
  void observe_verdict(int32_t d, int32_t n_accepted);

  /// One draft step (one draft forward pass and its distribution) took `seconds` (> 0; others are
  /// ignored). The first sample is dropped (warm-up).
  void observe_draft_step(double seconds);

  /// A target pass over `n_tokens` tokens (n = d + 1) took `seconds` (> 0; others are ignored).
  /// The first sample of each n is dropped (warm-up). Throws std::invalid_argument for n_tokens < 1.
  void observe_verify(int32_t n_tokens, double seconds);

  /// Posterior mean of the per-token acceptance probability.
  double alpha() const;
  /// E[tokens](d) under the current alpha (d >= 0).
  double expected_tokens(int32_t d) const;
  /// The averaged draft step time in seconds; 0 while unmeasured.
  double draft_step_seconds() const { return t_draft_ > 0 ? t_draft_ : 0.0; }
  /// t_verify(n) in seconds; for an unmeasured n the optimistic estimate from its nearest measured
  /// neighbours (see the file comment); 0 while no verify pass has been measured.
  double verify_seconds(int32_t n_tokens) const;
  /// Expected committed tokens per second at depth d (0 while nothing is measured).
  double expected_rate(int32_t d) const;

  const DraftPolicyParams& params() const { return p_; }

 private:
  double rate_at(double a, int32_t d) const;  // expected_rate with acceptance a
  bool probe_could_pay() const;

  DraftPolicyParams p_;
  double acc_ = 0, rej_ = 0;     // decayed accepted / rejected trial counts
  double t_draft_ = 0;           // <= 0: unmeasured
  std::vector<double> t_verify_; // index n; <= 0: unmeasured
  std::vector<int64_t> verify_seen_;  // samples offered per n, the dropped warm-up one included
  int64_t n_draft_seen_ = 0;
  int32_t zero_streak_ = 0;
  int32_t probe_interval_ = 0;  // current interval (probe_every, doubling up to probe_max)
};

}  // namespace minfer
