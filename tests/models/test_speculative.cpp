// Speculative decoding: the acceptance rule keeps the target distribution exactly; greedy output
// is identical to plain greedy decoding; a draft equal to the target is always accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/test_util.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {
namespace {

std::vector<float> random_dist(size_t n, std::mt19937_64& g, bool with_zeros) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> p(n);
  float s = 0;
  for (auto& x : p) s += (x = (with_zeros && u(g) < 0.3f) ? 0.0f : u(g));
  if (s == 0) p[0] = s = 1;
  for (auto& x : p) x /= s;
  return p;
}

TEST(Speculative, AcceptanceRuleKeepsTheTargetDistribution) {
  // The first token committed after a draft of depth d is distributed as p[0], whatever q is.
  std::mt19937_64& g = rng();
  for (int trial = 0; trial < 3; ++trial) {
    const size_t V = 6;
    const int32_t d = 1 + trial;
    std::vector<std::vector<float>> p, q;
    for (int32_t i = 0; i <= d; ++i) p.push_back(random_dist(V, g, true));
    for (int32_t i = 0; i < d; ++i) q.push_back(random_dist(V, g, false));
    SamplerParams sp;
    sp.seed = g();
    Sampler s(sp);
    std::vector<double> freq(V, 0.0), freq2(V, 0.0);
    const int n = 200000;
    int n_two = 0;
    for (int k = 0; k < n; ++k) {
      std::vector<int32_t> drafted;
      for (int32_t i = 0; i < d; ++i) drafted.push_back(s.sample_probs(q[static_cast<size_t>(i)]));
      const DraftVerdict v = verify_draft(p, q, drafted, s);
      ASSERT_GE(v.n_accepted, 0);
      ASSERT_LE(v.n_accepted, d);
      const int32_t first = v.n_accepted > 0 ? drafted[0] : v.next;
      freq[static_cast<size_t>(first)] += 1.0 / n;
      // The second token, given the first was drafted[0] == 0 and accepted: distributed as p[1].
      if (d >= 2 && v.n_accepted >= 1 && drafted[0] == 0) {
        const int32_t second = v.n_accepted > 1 ? drafted[1] : v.next;
        freq2[static_cast<size_t>(second)] += 1.0;
        ++n_two;
      }
    }
    for (size_t t = 0; t < V; ++t) {
      const double sd = std::sqrt(p[0][t] * (1 - p[0][t]) / n);
      EXPECT_NEAR(freq[t], p[0][t], 5 * sd + 1e-4) << "trial " << trial << " token " << t << " (seed " << seed() << ")";
      if (p[0][t] == 0) {
        EXPECT_EQ(freq[t], 0.0) << "a token the target rules out was emitted";
      }
    }
    if (n_two > 1000)
      for (size_t t = 0; t < V; ++t) {
        const double f = freq2[t] / n_two, sd = std::sqrt(p[1][t] * (1 - p[1][t]) / n_two);
        EXPECT_NEAR(f, p[1][t], 5 * sd + 1e-3) << "second token " << t;
      }
  }
}

TEST(Speculative, GreedyAcceptsExactlyTheTargetArgmaxPrefix) {
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
}

struct Pair {
  const char* target;
  const char* draft;
};

void PrintTo(const Pair& p, std::ostream* os) { *os << p.target << " <- " << p.draft; }

class SpeculativeGreedy : public ::testing::TestWithParam<Pair> {};

TEST_P(SpeculativeGreedy, OutputIdenticalToPlainGreedyDecoding) {
  const Pair pr = GetParam();
  auto tf = open_fixture(pr.target), df = open_fixture(pr.draft);
  if (!tf || !df) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
  CpuBackend cpu(2);
  auto target = models::load(tf, cpu);
  auto draft = models::load(df, cpu);
  auto tok = tokenizer::Tokenizer::from_gguf(*tf);
  SessionParams sp;
  sp.n_ctx = 256;
  SamplerParams greedy;
  greedy.temp = 0;
  GenerateParams gp;
  gp.n_predict = 64;
  gp.stop_at_eog = false;
  for (const char* text : {"def fibonacci(n):\n    ", "import os\nimport sys\n\n\nclass Config:\n"}) {
    auto prompt = tok.encode(text, false);
    Session plain(*target, cpu, sp);
    Sampler s1(greedy);
    auto ref = generate(plain, tok, s1, prompt, gp);
    for (bool adaptive : {false, true}) {
      Session ts(*target, cpu, sp), ds(*draft, cpu, sp);
      SpeculativeParams spp;
      spp.n_draft = 5;
      spp.adaptive = adaptive;
      SpeculativeDecoder dec(ts, ds, spp);
      Sampler s2(greedy);
      auto got = dec.generate(tok, s2, prompt, gp);
      EXPECT_EQ(got.ids, ref.ids) << pr.target << " <- " << pr.draft << " prompt " << text;
      EXPECT_EQ(got.text, ref.text);
      // The caches hold exactly the committed tokens (but the last).
      EXPECT_EQ(ts.n_past(), static_cast<int32_t>(prompt.size() + got.ids.size() - 1));
      std::printf("[ spec ] %s <- %s adaptive=%d: %lld steps, acceptance %.1f%%\n", pr.target, pr.draft, adaptive,
                  static_cast<long long>(dec.stats().n_steps), 100 * dec.stats().acceptance());
      if (std::string(pr.target) == pr.draft) {
        EXPECT_EQ(dec.stats().n_accepted, dec.stats().n_drafted);
      }
      EXPECT_LT(dec.stats().n_steps, static_cast<int64_t>(got.ids.size()));  // fewer target passes than tokens
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeGreedy,
                         ::testing::Values(Pair{"qwen3-s/qwen3-s-Q4_K_M.gguf", "qwen3-xs/qwen3-xs-f16.gguf"},
                                           Pair{"qwen3-xs/qwen3-xs-f16.gguf", "qwen3-xs/qwen3-xs-f16.gguf"}),
                         [](const auto& info) { return info.index == 0 ? std::string("qwen3_s_from_xs") : std::string("self_draft"); });

}  // namespace
}  // namespace minfer::test
