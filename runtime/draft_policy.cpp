#include "runtime/draft_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace minfer {
namespace {

void require(bool ok, const char* field, double v, const char* range) {
  if (!ok) throw std::invalid_argument(fmt::format("DraftPolicyParams::{} = {} must be {}", field, v, range));
}

}  // namespace

DraftPolicy::DraftPolicy(const DraftPolicyParams& p) : p_(p) {
  require(p.d_min >= 0, "d_min", p.d_min, ">= 0");
  require(p.d_max >= p.d_min, "d_max", p.d_max, fmt::format(">= d_min ({})", p.d_min).c_str());
  require(p.prior_alpha > 0 && p.prior_alpha < 1, "prior_alpha", p.prior_alpha, "in (0, 1)");
  require(p.prior_weight > 0 && std::isfinite(p.prior_weight), "prior_weight", p.prior_weight, "> 0");
  require(p.forget > 0 && p.forget <= 1, "forget", p.forget, "in (0, 1]");
  require(p.ema_weight > 0 && p.ema_weight <= 1, "ema_weight", p.ema_weight, "in (0, 1]");
  require(p.probe_every >= 1, "probe_every", p.probe_every, ">= 1");
  require(p.probe_max >= p.probe_every, "probe_max", p.probe_max, fmt::format(">= probe_every ({})", p.probe_every).c_str());
  probe_interval_ = p.probe_every;
}

double DraftPolicy::alpha() const {
  return (p_.prior_alpha * p_.prior_weight + acc_) / (p_.prior_weight + acc_ + rej_);
}

namespace {

// 1 + a + ... + a^d; the closed form loses precision as a -> 1.
double tokens_at(double a, int32_t d) {
  if (1 - a < 1e-9) return d + 1.0;
  return (1 - std::pow(a, d + 1)) / (1 - a);
}

}  // namespace

double DraftPolicy::expected_tokens(int32_t d) const { return tokens_at(alpha(), d); }

double DraftPolicy::verify_seconds(int32_t n) const {
  const auto N = static_cast<int32_t>(t_verify_.size());
  if (n >= 1 && n < N && t_verify_[static_cast<size_t>(n)] > 0) return t_verify_[static_cast<size_t>(n)];
  // Lower bounds from the nearest measured sizes below (t is non-decreasing in n) and above (t / n
  // is non-increasing: batching amortizes); the larger is the tightest.
  double lo = 0, hi = 0;
  for (int32_t m = std::min(n, N) - 1; m >= 1 && lo == 0; --m) lo = std::max(0.0, t_verify_[static_cast<size_t>(m)]);
  for (int32_t m = std::max(n, 0) + 1; m < N && hi == 0; ++m)
    if (t_verify_[static_cast<size_t>(m)] > 0) hi = t_verify_[static_cast<size_t>(m)] * n / m;
  return std::max(lo, hi);
}

double DraftPolicy::rate_at(double a, int32_t d) const {
  const double cost = d * draft_step_seconds() + verify_seconds(d + 1);
  return cost > 0 ? tokens_at(a, d) / cost : 0;
}

double DraftPolicy::expected_rate(int32_t d) const { return rate_at(alpha(), d); }

bool DraftPolicy::probe_could_pay() const {
  if (draft_step_seconds() <= 0) return true;  // the draft was never timed: only a probe can tell
  const double n = p_.prior_weight + acc_ + rej_, m = alpha();
  const double a_hi = std::min(0.999, m + 2 * std::sqrt(m * (1 - m) / (n + 1)));
  const double plain = rate_at(m, 0);
  for (int32_t d = std::max(1, p_.d_min); d <= p_.d_max; ++d)
    if (rate_at(a_hi, d) > plain) return true;
  return false;
}

int32_t DraftPolicy::choose() {
  const int32_t probe = std::min(p_.d_max, std::max(1, p_.d_min));
  int32_t best = probe;
  if (verify_seconds(1) > 0) {  // something measured
    double best_rate = -1;
    for (int32_t d = p_.d_min; d <= p_.d_max; ++d) {
      const double r = expected_rate(d);
      if (r > best_rate) {  // strict: the smaller d wins a tie
        best_rate = r;
        best = d;
      }
    }
  }
  if (best == 0) {
    if (++zero_streak_ > probe_interval_) {
      zero_streak_ = 0;
      probe_interval_ = std::min(p_.probe_max, 2 * probe_interval_);  // reset below if the probe pays
      if (probe_could_pay()) return probe;
      // Skipped: the evidence ages instead, so the bound widens and a later probe may come.
      acc_ *= p_.forget;
      rej_ *= p_.forget;
    }
  } else {
    zero_streak_ = 0;
    probe_interval_ = p_.probe_every;
  }
  return best;
}

void DraftPolicy::observe_verdict(int32_t d, int32_t n_accepted) {
  if (d < 0 || n_accepted < 0 || n_accepted > d)
    throw std::invalid_argument(fmt::format("DraftPolicy::observe_verdict: {} accepted of {} drafted", n_accepted, d));
  if (d == 0) return;
  acc_ = acc_ * p_.forget + n_accepted;
  rej_ = rej_ * p_.forget + (n_accepted < d ? 1 : 0);
}

void DraftPolicy::observe_draft_step(double s) {
  if (!(s > 0) || !std::isfinite(s)) return;
  if (n_draft_seen_++ == 0) return;  // warm-up
  t_draft_ = t_draft_ > 0 ? t_draft_ + p_.ema_weight * (s - t_draft_) : s;
}

void DraftPolicy::observe_verify(int32_t n, double s) {
  if (n < 1) throw std::invalid_argument(fmt::format("DraftPolicy::observe_verify: batch of {} tokens", n));
  if (!(s > 0) || !std::isfinite(s)) return;
  if (t_verify_.size() <= static_cast<size_t>(n)) {
    t_verify_.resize(static_cast<size_t>(n) + 1, 0.0);
    verify_seen_.resize(static_cast<size_t>(n) + 1, 0);
  }
  if (verify_seen_[static_cast<size_t>(n)]++ == 0) return;  // warm-up
  double& t = t_verify_[static_cast<size_t>(n)];
  t = t > 0 ? t + p_.ema_weight * (s - t) : s;
}

}  // namespace minfer
