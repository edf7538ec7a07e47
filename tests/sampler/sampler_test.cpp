// Sampler stages and the full chain. Expected values come from hand arithmetic or from plain
// double-precision loops written here, never from the sampler itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "runtime/sampler.h"

using namespace minfer;

namespace {

uint64_t test_seed() {
  if (const char* env = std::getenv("MINFER_TEST_SEED"); env && *env) return std::strtoull(env, nullptr, 0);
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

std::vector<int32_t> ids_of(const Candidates& c) {
  std::vector<int32_t> out;
  for (const auto& t : c) out.push_back(t.id);
  return out;
}

std::vector<float> log_probs(std::vector<double> p) {
  std::vector<float> l;
  for (double x : p) l.push_back(x > 0 ? static_cast<float>(std::log(x)) : -INFINITY);
  return l;
}

// Independent reference of the whole chain without penalties, in double.
std::vector<double> reference_probs(const std::vector<float>& logits, double temp, int top_k, double top_p,
                                    double min_p) {
  const size_t n = logits.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  size_t keep = (top_k > 0 && size_t(top_k) < n) ? size_t(top_k) : n;
  auto softmax_of = [&](size_t m, double t) {
    std::vector<double> p(m);
    double s = 0;
    for (size_t i = 0; i < m; ++i) s += p[i] = std::exp((logits[order[i]] - logits[order[0]]) / t);
    for (auto& x : p) x /= s;
    return p;
  };
  if (top_p < 1.0) {
    const auto p = softmax_of(keep, 1.0);
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += p[i];
      if (cum >= top_p) { keep = i + 1; break; }
    }
  }
  if (min_p > 0.0) {
    size_t m = 0;
    while (m < keep && std::exp(double(logits[order[m]]) - logits[order[0]]) >= min_p) ++m;
    keep = std::max<size_t>(m, 1);
  }
  const auto p = softmax_of(keep, temp);
  std::vector<double> full(n, 0.0);
  for (size_t i = 0; i < keep; ++i) full[order[i]] = p[i];
  return full;
}

}  // namespace

TEST(SamplerStages, RepeatPenaltyDividesPositiveMultipliesNegative) {
  Candidates c = make_candidates(std::vector<float>{3.0f, -1.0f, 0.5f});
  const std::vector<int32_t> seen = {0, 1};
  apply_penalties(c, seen, 1.5f, 0.0f, 0.0f);
  EXPECT_FLOAT_EQ(c[0].logit, 2.0f);
  EXPECT_FLOAT_EQ(c[1].logit, -1.5f);
  EXPECT_FLOAT_EQ(c[2].logit, 0.5f);  // unseen: unchanged
}

TEST(SamplerStages, FrequencyAndPresencePenalties) {
  Candidates c = make_candidates(std::vector<float>{2.0f, 1.0f, 4.0f});
  const std::vector<int32_t> seen = {0, 0, 0, 2, 7};  // 7 is not a candidate: ignored
  apply_penalties(c, seen, 2.0f, 0.25f, 0.5f);
  EXPECT_FLOAT_EQ(c[0].logit, 2.0f / 2 - 3 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(c[1].logit, 1.0f);
  EXPECT_FLOAT_EQ(c[2].logit, 4.0f / 2 - 1 * 0.25f - 0.5f);
}

TEST(SamplerStages, TopKTiesBrokenByLowerId) {
  Candidates c = make_candidates(log_probs({0.4, 0.3, 0.3, 0.0}));
  apply_top_k(c, 2);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{0, 1}));
  Candidates d = make_candidates(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f});
  apply_top_k(d, 2);
  EXPECT_EQ(ids_of(d), (std::vector<int32_t>{1, 2}));
  Candidates e = make_candidates(std::vector<float>{1.0f, 2.0f});
  apply_top_k(e, 0);  // disabled
  EXPECT_EQ(e.size(), 2u);
}

TEST(SamplerStages, TopPMinPTemperatureSoftmax) {
  const auto logits = log_probs({0.05, 0.5, 0.15, 0.3});
  Candidates c = make_candidates(logits);
  apply_top_p(c, 0.75f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3}));  // 0.5 + 0.3 >= 0.75
  c = make_candidates(logits);
  apply_top_p(c, 0.81f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3, 2}));
  c = make_candidates(logits);
  apply_top_p(c, 1e-9f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1}));  // never empty

  c = make_candidates(logits);
  apply_min_p(c, 0.2f);  // keep p >= 0.1
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3, 2}));
  c = make_candidates(logits);
  apply_min_p(c, 1.0f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1}));

  c = make_candidates(std::vector<float>{1.0f, -3.0f});
  apply_temperature(c, 2.0f);
  EXPECT_FLOAT_EQ(c[0].logit, 0.5f);
  EXPECT_FLOAT_EQ(c[1].logit, -1.5f);
  apply_softmax(c);
  const double e = std::exp(-2.0);
  EXPECT_NEAR(c[0].p, 1.0 / (1.0 + e), 1e-7);
  EXPECT_NEAR(c[1].p, e / (1.0 + e), 1e-7);
}

TEST(Sampler, TopK1IsArgmaxWhateverTopP) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (float top_p : {0.01f, 0.5f, 1.0f}) {
    SamplerParams sp;
    sp.temp = 1.5f;
    sp.top_k = 1;
    sp.top_p = top_p;
    sp.seed = rng();
    Sampler s(sp);
    for (int i = 0; i < 50; ++i) {
      std::vector<float> logits(100);
      for (auto& x : logits) x = nd(rng);
      const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
      EXPECT_EQ(s.sample(logits), best);
    }
  }
}

TEST(Sampler, KeptSetNeverEmpty) {
  SamplerParams sp;
  sp.temp = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1e-12f;
  sp.min_p = 1.0f;
  sp.seed = 7;
  Sampler s(sp);
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f};
  EXPECT_EQ(s.sample(logits), 1);
  const auto p = s.probs(logits);
  EXPECT_FLOAT_EQ(p[1], 1.0f);
}

TEST(Sampler, GreedyTiesAndNoRngUse) {
  SamplerParams sp;
  sp.temp = 0.0f;
  sp.seed = 123;
  Sampler s(sp);
  const std::vector<float> logits = {0.5f, 3.0f, -2.0f, 3.0f};
  EXPECT_EQ(s.sample(logits), 1);
  EXPECT_EQ(argmax(logits), 1);
  const auto p = s.probs(logits);
  EXPECT_EQ(p, (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));
  Sampler fresh(sp);
  EXPECT_EQ(s.uniform(), fresh.uniform());  // greedy sampling did not consume the RNG
  // Penalties still apply in greedy mode.
  sp.repeat_penalty = 2.0f;
  Sampler pen(sp);
  pen.accept(1);
  EXPECT_EQ(pen.sample(logits), 3);
}

TEST(Sampler, SeedsReproduceAndDiffer) {
  const std::vector<float> logits = {1.0f, 0.8f, 0.6f, 0.4f, 0.2f, 0.0f, -0.2f, -0.4f};
  auto run = [&](uint64_t seed) {
    SamplerParams sp;
    sp.temp = 1.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = seed;
    Sampler s(sp);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  // reset() restarts the sequence.
  SamplerParams sp;
  sp.seed = 99;
  Sampler s(sp);
  std::vector<int32_t> a, b;
  for (int i = 0; i < 50; ++i) a.push_back(s.sample(logits));
  s.reset();
  for (int i = 0; i < 50; ++i) b.push_back(s.sample(logits));
  EXPECT_EQ(a, b);
  // kSeedRandom draws a seed and reports it.
  SamplerParams r;
  Sampler rs(r);
  SamplerParams r2;
  r2.seed = rs.seed();
  Sampler rs2(r2);
  EXPECT_EQ(rs.uniform(), rs2.uniform());
}

TEST(Sampler, ProbsMatchIndependentReference) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  struct P { float temp; int k; float top_p, min_p; };
  for (const P& c : {P{0.8f, 40, 0.95f, 0.05f}, P{1.0f, 0, 1.0f, 0.0f}, P{0.5f, 5, 0.9f, 0.0f},
                     P{1.3f, 0, 0.7f, 0.1f}, P{2.0f, 3, 1.0f, 0.3f}}) {
    std::vector<float> logits(300);
    for (auto& x : logits) x = nd(rng);
    SamplerParams sp;
    sp.temp = c.temp;
    sp.top_k = c.k;
    sp.top_p = c.top_p;
    sp.min_p = c.min_p;
    sp.seed = 1;
    const auto got = Sampler(sp).probs(logits);
    const auto want = reference_probs(logits, c.temp, c.k, c.top_p, c.min_p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << i;
  }
}

TEST(Sampler, EmpiricalFrequenciesMatchDistribution) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> logits(12);
  for (auto& x : logits) x = nd(rng);
  SamplerParams sp;
  sp.temp = 0.9f;
  sp.top_k = 8;
  sp.top_p = 0.97f;
  sp.min_p = 0.02f;
  sp.seed = rng();
  Sampler s(sp);
  const auto want = reference_probs(logits, sp.temp, sp.top_k, sp.top_p, sp.min_p);
  const int n = 200000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits)];
  double chi2 = 0.0;
  int df = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (want[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " was filtered out but sampled";
      continue;
    }
    const double e = want[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++df;
  }
  // 99.99 % quantile of chi-square with df <= 7 is below 30.
  EXPECT_LT(chi2, 30.0) << "df " << df;
}

// Past kSortedPickMax kept candidates sample() walks them unsorted: the distribution must not
// change. A vocabulary of 4x that with no filters (OpenAI's defaults) and a few heavy tokens at
// random ids; frequencies of the heavy tokens and of the rest, lumped, against the reference.
TEST(Sampler, UnfilteredLargeVocabularyFrequenciesMatchDistribution) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> logits(4 * Sampler::kSortedPickMax);
  for (auto& x : logits) x = nd(rng);
  std::vector<size_t> heavy;
  for (int i = 0; i < 6; ++i) {
    heavy.push_back(static_cast<size_t>(rng() % logits.size()));
    logits[heavy.back()] = 7.0f + static_cast<float>(i) * 0.3f;
  }
  SamplerParams sp{.temp = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f};
  sp.seed = rng();
  Sampler s(sp);
  const auto want = reference_probs(logits, sp.temp, sp.top_k, sp.top_p, sp.min_p);
  const int n = 50000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.sample(logits))];
  double chi2 = 0.0, rest_want = 1.0;
  int rest = n;
  std::sort(heavy.begin(), heavy.end());
  heavy.erase(std::unique(heavy.begin(), heavy.end()), heavy.end());
  for (size_t id : heavy) {
    const double e = want[id] * n;
    chi2 += (counts[id] - e) * (counts[id] - e) / e;
    rest -= counts[id];
    rest_want -= want[id];
  }
  const double e = rest_want * n;
  chi2 += (rest - e) * (rest - e) / e;
  // df <= 6: the 99.99 % quantile of chi-square is below 28.
  EXPECT_LT(chi2, 28.0);
}

TEST(Sampler, SampleProbsAndUniform) {
  SamplerParams sp;
  sp.seed = 5;
  Sampler s(sp);
  const std::vector<float> p = {0.0f, 3.0f, 0.0f, 1.0f};  // unnormalized
  int c1 = 0;
  for (int i = 0; i < 4000; ++i) {
    const int32_t t = s.sample_probs(p);
    ASSERT_TRUE(t == 1 || t == 3);
    c1 += t == 1;
  }
  EXPECT_NEAR(c1 / 4000.0, 0.75, 0.04);
  for (int i = 0; i < 1000; ++i) {
    const double u = s.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  EXPECT_THROW(s.sample_probs(std::vector<float>{0.0f, 0.0f}), std::invalid_argument);
  EXPECT_THROW(s.sample_probs(std::vector<float>{-0.1f, 1.0f}), std::invalid_argument);
  EXPECT_THROW(s.sample_probs(std::vector<float>{NAN, 1.0f}), std::invalid_argument);
}

TEST(Sampler, NonFiniteLogitsAreErrors) {
  Sampler s;
  for (float bad : {NAN, INFINITY}) {
    std::vector<float> logits = {0.1f, 0.2f, bad, 0.3f};
    EXPECT_THROW(s.sample(logits), std::invalid_argument);
    EXPECT_THROW(s.probs(logits), std::invalid_argument);
    EXPECT_THROW(argmax(logits), std::invalid_argument);
    try {
      make_candidates(logits);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("logit 2"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(s.sample(std::vector<float>{-INFINITY, -INFINITY}), std::invalid_argument);
  EXPECT_THROW(s.sample(std::vector<float>{}), std::invalid_argument);
  // -inf alone is a mask: never sampled.
  SamplerParams sp;
  sp.temp = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 11;
  Sampler m(sp);
  for (int i = 0; i < 500; ++i) EXPECT_NE(m.sample(std::vector<float>{-INFINITY, 0.0f, 0.0f}), 0);
}

TEST(Sampler, HistoryWindowAndParams) {
  SamplerParams sp;
  sp.temp = 0.0f;
  sp.repeat_penalty = 10.0f;
  sp.repeat_last_n = 2;
  Sampler s(sp);
  const std::vector<float> logits = {5.0f, 4.0f, 3.0f, 2.0f};
  s.accept(0);
  s.accept(1);
  EXPECT_EQ(s.sample(logits), 2);  // 0 and 1 penalized to 0.5 and 0.4
  s.accept(2);                     // window now {1, 2}: 0 is free again
  EXPECT_EQ(s.sample(logits), 0);
  s.reset();
  s.accept(3);
  EXPECT_EQ(s.sample(logits), 0);

  SamplerParams bad;
  bad.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{bad}, std::invalid_argument);
  bad = {};
  bad.temp = NAN;
  EXPECT_THROW(Sampler{bad}, std::invalid_argument);
  bad = {};
  bad.repeat_last_n = -2;
  EXPECT_THROW(Sampler{bad}, std::invalid_argument);
}

TEST(Sampler, FusedPathEqualsStagedChain) {
  // Sampler fuses the stages for speed; it must give exactly what the stages give one by one.
  const uint64_t seed = test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int iter = 0; iter < 200; ++iter) {
    const size_t n = 1 + rng() % 3000;
    const float scale = 0.1f + static_cast<float>(rng() % 80) / 10.0f;
    std::vector<float> logits(n);
    for (auto& x : logits) x = std::round(nd(rng) * scale * 4.0f) / 4.0f;  // rounding makes ties
    if (n > 3 && rng() % 4 == 0) logits[rng() % n] = -INFINITY;
    SamplerParams sp;
    sp.temp = 0.2f + static_cast<float>(rng() % 20) / 10.0f;
    const int32_t ks[] = {0, 1, 2, 5, 40, 100000};
    sp.top_k = ks[rng() % 6];
    const float ps[] = {0.0f, 0.3f, 0.9f, 0.95f, 1.0f};
    sp.top_p = ps[rng() % 5];
    const float mps[] = {0.0f, 0.05f, 0.2f, 1.0f, 1.5f};
    sp.min_p = mps[rng() % 5];
    sp.repeat_penalty = rng() % 2 ? 1.0f : 1.3f;
    sp.frequency_penalty = rng() % 2 ? 0.0f : 0.2f;
    sp.presence_penalty = rng() % 2 ? 0.0f : 0.5f;
    sp.repeat_last_n = 8;
    sp.seed = rng();
    Sampler s(sp);
    std::vector<int32_t> hist;
    for (int i = 0; i < 12; ++i) {
      const auto t = static_cast<int32_t>(rng() % n);
      s.accept(t);
      hist.push_back(t);
    }
    const std::vector<int32_t> window(hist.end() - 8, hist.end());
    Candidates c = make_candidates(logits);
    apply_penalties(c, window, sp.repeat_penalty, sp.frequency_penalty, sp.presence_penalty);
    apply_top_k(c, sp.top_k);
    apply_top_p(c, sp.top_p);
    apply_min_p(c, sp.min_p);
    apply_temperature(c, sp.temp);
    apply_softmax(c);
    std::vector<float> want(n, 0.0f);
    for (const auto& t : c) want[t.id] = t.p;
    ASSERT_EQ(s.probs(logits), want) << "iter " << iter << " n " << n << " k " << sp.top_k << " p "
                                     << sp.top_p << " min_p " << sp.min_p;
  }
}
