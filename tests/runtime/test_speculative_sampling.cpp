// Speculative sampling's acceptance rule (verify_draft) on small synthetic distributions: the
// committed tokens follow the target distribution (chi-square goodness of fit, p > 0.01), tokens
// the target rules out never appear, and greedy accepts exactly the argmax prefix.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/stats.h"
#include "runtime/speculative.h"

namespace minfer::test {
namespace {

struct Fit {
  double chi2 = 0;
  int df = -1;
  double p = 0;
  int64_t outside = 0;  ///< draws of categories with expected probability 0
};

/// Pearson's chi-square of `counts` (n draws) against `probs`, over the categories with probs > 0.
Fit chi_square(const std::vector<int64_t>& counts, const std::vector<float>& probs) {
  Fit f;
  int64_t n = 0;
  for (auto c : counts) n += c;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] <= 0) {
      f.outside += counts[t];
      continue;
    }
    const double e = static_cast<double>(n) * probs[t];
    f.chi2 += (static_cast<double>(counts[t]) - e) * (static_cast<double>(counts[t]) - e) / e;
    ++f.df;
  }
  f.p = chi2_upper_tail(f.chi2, f.df);
  return f;
}

TEST(SpeculativeSampling, ChiSquareTailMatchesPublishedCriticalValues) {
  // Upper-tail 0.01 critical values, NIST/SEMATECH e-Handbook of Statistical Methods, §1.3.6.7.4
  // "Critical Values of the Chi-Square Distribution".
  const std::pair<int, double> table[] = {{1, 6.635}, {2, 9.210}, {3, 11.345}, {4, 13.277}, {5, 15.086},
                                          {6, 16.812}, {7, 18.475}, {8, 20.090}, {10, 23.209}, {30, 50.892}};
  for (auto [df, x] : table) EXPECT_NEAR(chi2_upper_tail(x, df), 0.01, 1e-4) << "df " << df;
  // 0.05 column, and the median-ish region (both branches of gamma_q).
  EXPECT_NEAR(chi2_upper_tail(11.070, 5), 0.05, 1e-4);
  EXPECT_NEAR(chi2_upper_tail(0.554, 5), 0.99, 1e-4);
  EXPECT_NEAR(chi2_upper_tail(2.0, 2), std::exp(-1.0), 1e-12);  // df 2: exp(-x/2) exactly
}

// A distribution over v tokens; zero_frac of them get probability 0 (never all); the others
// weights in [0.2, 1], so every nonzero probability is at least ~0.2 / v (expected counts stay large).
std::vector<float> synthetic_dist(size_t v, double zero_frac, std::mt19937_64& g) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> p(v);
  double s = 0;
  for (auto& x : p) {
    x = u(g) < zero_frac ? 0.0f : static_cast<float>(0.2 + 0.8 * u(g));
    s += x;
  }
  if (s == 0) p[g() % v] = 1.0f, s = 1;
  for (auto& x : p) x = static_cast<float>(x / s);
  return p;
}

struct Draws {
  std::vector<int64_t> first, second;  // counts of the first committed token, and of the second one
                                       // given the first was the accepted draft `cond`
};

// Runs n rounds of draft-then-verify at depth d. `commit_drafts_blindly` skips the rule (commits
// the draft tokens as they are) to show the test has the power to reject a wrong sampler.
Draws run_rounds(const std::vector<std::vector<float>>& p, const std::vector<std::vector<float>>& q, int32_t cond, int n,
                 uint64_t seed, bool commit_drafts_blindly = false) {
  const size_t V = p[0].size();
  const auto d = static_cast<int32_t>(q.size());
  SamplerParams sp;
  sp.seed = seed;
  Sampler s(sp);
  Draws out{std::vector<int64_t>(V, 0), std::vector<int64_t>(V, 0)};
  std::vector<int32_t> drafted(static_cast<size_t>(d));
  for (int k = 0; k < n; ++k) {
    for (int32_t i = 0; i < d; ++i) drafted[static_cast<size_t>(i)] = s.sample_probs(q[static_cast<size_t>(i)]);
    DraftVerdict v = verify_draft(p, q, drafted, s);
    EXPECT_GE(v.n_accepted, 0);
    EXPECT_LE(v.n_accepted, d);
    if (commit_drafts_blindly) v = {d, s.sample_probs(p[static_cast<size_t>(d)])};
    const int32_t first = v.n_accepted > 0 ? drafted[0] : v.next;
    ++out.first[static_cast<size_t>(first)];
    // Given the first token was drafted as `cond` and accepted, the second is distributed as p[1].
    if (d >= 2 && v.n_accepted >= 1 && drafted[0] == cond) ++out.second[static_cast<size_t>(v.n_accepted > 1 ? drafted[1] : v.next)];
  }
  return out;
}

struct Problem {
  std::vector<std::vector<float>> p, q;
  int32_t cond = 0;  // the first-position token the second-position check conditions on
};

// Target distributions p[0..d] with zeros (the target rules tokens out), draft distributions with
// zeros too (tokens the draft never proposes) and on every third depth the draft's mass on tokens
// the target rules out.
Problem make_problem(size_t V, int32_t d, std::mt19937_64& g) {
  Problem pr;
  for (int32_t i = 0; i <= d; ++i) pr.p.push_back(synthetic_dist(V, 0.3, g));
  for (int32_t i = 0; i < d; ++i) pr.q.push_back(synthetic_dist(V, i % 3 == 2 ? 0.0 : 0.25, g));
  // Condition on the token with the most mass that is both drafted and accepted at position 0.
  double best = -1;
  for (size_t t = 0; t < V; ++t) {
    const double m = std::min(pr.p[0][t], pr.q.empty() ? 0.0f : pr.q[0][t]);
    if (m > best) best = m, pr.cond = static_cast<int32_t>(t);
  }
  return pr;
}

TEST(SpeculativeSampling, CommittedTokensFollowTheTargetDistribution) {
  const size_t V = 8;
  const int n = 100000;
  std::mt19937_64 g(20240601);  // fixed: the test is deterministic
  for (int32_t d : {1, 2, 3, 5}) {
    const Problem pr = make_problem(V, d, g);
    const Draws dr = run_rounds(pr.p, pr.q, pr.cond, n, 1000 + static_cast<uint64_t>(d));
    const Fit f1 = chi_square(dr.first, pr.p[0]);
    EXPECT_EQ(f1.outside, 0) << "depth " << d << ": a first token the target rules out was committed";
    EXPECT_GT(f1.df, 0);
    EXPECT_GT(f1.p, 0.01) << "depth " << d << ": first token chi2 " << f1.chi2 << " df " << f1.df;
    std::printf("[ spec ] depth %d first token: chi2 %.2f df %d p %.3f\n", d, f1.chi2, f1.df, f1.p);
    if (d >= 2) {
      int64_t n2 = 0;
      for (auto c : dr.second) n2 += c;
      ASSERT_GT(n2, 5000) << "too few conditioned draws";
      const Fit f2 = chi_square(dr.second, pr.p[1]);
      EXPECT_EQ(f2.outside, 0) << "depth " << d << ": a second token the target rules out was committed";
      EXPECT_GT(f2.p, 0.01) << "depth " << d << ": second token chi2 " << f2.chi2 << " df " << f2.df << " over " << n2;
      std::printf("[ spec ] depth %d second token (%lld draws): chi2 %.2f df %d p %.3f\n", d, static_cast<long long>(n2), f2.chi2,
                  f2.df, f2.p);
    }
  }
}

TEST(SpeculativeSampling, TheChiSquareTestRejectsTheDraftDistribution) {
  // Committing the drafts without the acceptance rule yields q's distribution, not p's: the same
  // check must fail, or it could not catch a broken rule.
  std::mt19937_64 g(77);
  const Problem pr = make_problem(8, 2, g);
  const Draws dr = run_rounds(pr.p, pr.q, pr.cond, 20000, 5, /*commit_drafts_blindly=*/true);
  const Fit f = chi_square(dr.first, pr.p[0]);
  EXPECT_TRUE(f.outside > 0 || f.p < 1e-6) << "chi2 " << f.chi2 << " p " << f.p;
}

TEST(SpeculativeSampling, GreedyAcceptsExactlyTheTargetArgmaxPrefix) {
  auto onehot = [](size_t n, size_t i) {
    std::vector<float> v(n, 0.0f);
    v[i] = 1.0f;
    return v;
  };
  Sampler s;
  std::vector<std::vector<float>> p{onehot(5, 2), onehot(5, 4), onehot(5, 1)}, q{onehot(5, 2), onehot(5, 3)};
  const int32_t drafted[] = {2, 3};
  auto v = verify_draft(p, q, drafted, s);
  EXPECT_EQ(v.n_accepted, 1);
  EXPECT_EQ(v.next, 4);
  const int32_t good[] = {2, 4};
  std::vector<std::vector<float>> q2{onehot(5, 2), onehot(5, 4)};
  v = verify_draft(p, q2, good, s);
  EXPECT_EQ(v.n_accepted, 2);
  EXPECT_EQ(v.next, 1);
  const int32_t bad_first[] = {0, 4};
  std::vector<std::vector<float>> q3{onehot(5, 0), onehot(5, 4)};
  v = verify_draft(p, q3, bad_first, s);
  EXPECT_EQ(v.n_accepted, 0);
  EXPECT_EQ(v.next, 2);
}

TEST(SpeculativeSampling, MismatchedCountsAreRejected) {
  Sampler s;
  std::vector<std::vector<float>> p{{0.5f, 0.5f}}, q{{0.5f, 0.5f}};
  const int32_t one[] = {1};
  EXPECT_THROW(verify_draft(p, q, one, s), std::invalid_argument);  // needs 2 target rows
}

}  // namespace
}  // namespace minfer::test
