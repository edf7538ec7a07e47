#include "runtime/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace minfer {
namespace {

// Descending logit, lower id first on ties: a strict total order, so no result depends on the
// sort algorithm's stability.
bool better(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

bool is_sorted_desc(const Candidates& c) { return std::is_sorted(c.begin(), c.end(), better); }

void sort_desc(Candidates& c) {
  if (!is_sorted_desc(c)) std::sort(c.begin(), c.end(), better);
}

void check_logit(float v, size_t i) {
  if (std::isnan(v) || v == INFINITY) {
    throw std::invalid_argument("sampler: logit " + std::to_string(i) + " is " +
                                (std::isnan(v) ? "NaN" : "+inf"));
  }
}

uint64_t resolve_seed(uint64_t seed) {
  if (seed != kSeedRandom) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

double u01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Unnormalized softmax weight of a logit relative to the maximum.
double weight(float logit, double max) {
  return logit == -INFINITY ? 0.0 : std::exp(static_cast<double>(logit) - max);
}

// Validates logits like make_candidates. The first loop is branch-free (it vectorizes); the slow
// loop only runs to name the bad index.
void check_logits(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("sampler: empty logits");
  // On the IEEE-754 bits: exponent all ones is inf or NaN; only -inf (0xff800000) is allowed.
  uint32_t bad = 0, n_neg_inf = 0;
  for (float v : logits) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    const uint32_t neg_inf = b == 0xff800000u;
    bad |= static_cast<uint32_t>((b & 0x7fffffffu) >= 0x7f800000u) & (neg_inf ^ 1u);
    n_neg_inf += neg_inf;
  }
  const bool any = n_neg_inf != logits.size();
  if (bad) {
    for (size_t i = 0; i < logits.size(); ++i) check_logit(logits[i], i);
  }
  if (!any) throw std::invalid_argument("sampler: every logit is -inf");
}

// A key that orders like the float (for non-NaN values) but compares as an integer, so block
// maxima vectorize without fast-math.
inline int32_t order_key(float f) {
  int32_t b;
  std::memcpy(&b, &f, 4);
  return b ^ ((b >> 31) & 0x7fffffff);
}

// Penalizes one logit (llama.cpp semantics, see apply_penalties).
float penalize(float logit, int32_t n, float repeat, float freq, float presence) {
  // Dividing a negative logit would raise it; llama.cpp multiplies instead.
  logit = logit <= 0.0f ? logit * repeat : logit / repeat;
  logit -= static_cast<float>(n) * freq + presence;
  // A penalty < 1 or a negative presence penalty can overflow a huge logit; keep it sampleable.
  return logit == INFINITY ? FLT_MAX : logit;
}

// Sorts c[from, end) far enough that c[from, to) holds, in order, the best (to - from) of them.
void sort_range_prefix(Candidates& c, size_t from, size_t to) {
  if (to < c.size()) std::nth_element(c.begin() + from, c.begin() + to, c.end(), better);
  std::sort(c.begin() + from, c.begin() + to, better);
}

}  // namespace

Candidates make_candidates(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("sampler: empty logits");
  Candidates c(logits.size());
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    check_logit(logits[i], i);
    any |= logits[i] != -INFINITY;
    c[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  }
  if (!any) throw std::invalid_argument("sampler: every logit is -inf");
  return c;
}

void apply_penalties(Candidates& c, std::span<const int32_t> recent, float repeat_penalty,
                     float frequency_penalty, float presence_penalty) {
  if (recent.empty() ||
      (repeat_penalty == 1.0f && frequency_penalty == 0.0f && presence_penalty == 0.0f)) {
    return;
  }
  std::unordered_map<int32_t, int32_t> counts;
  for (int32_t t : recent) ++counts[t];
  for (auto [id, n] : counts) {
    // Fast path: candidates still in id order (straight from make_candidates).
    TokenCandidate* tc = nullptr;
    if (id >= 0 && static_cast<size_t>(id) < c.size() && c[id].id == id) {
      tc = &c[id];
    } else {
      auto it = std::find_if(c.begin(), c.end(), [id](const TokenCandidate& x) { return x.id == id; });
      if (it != c.end()) tc = &*it;
    }
    if (tc) tc->logit = penalize(tc->logit, n, repeat_penalty, frequency_penalty, presence_penalty);
  }
}

void apply_top_k(Candidates& c, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= c.size()) return;
  std::partial_sort(c.begin(), c.begin() + k, c.end(), better);
  c.resize(static_cast<size_t>(k));
}

namespace {

// p = softmax(logit) in the candidates' current order (sums in that order, in double).
void softmax_in_order(Candidates& c) {
  double max = -INFINITY;
  for (const TokenCandidate& tc : c) max = std::max(max, static_cast<double>(tc.logit));
  double sum = 0.0;
  std::vector<double> e(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    e[i] = weight(c[i].logit, max);
    sum += e[i];
  }
  if (!(sum > 0.0)) throw std::invalid_argument("sampler: every candidate logit is -inf");
  for (size_t i = 0; i < c.size(); ++i) c[i].p = static_cast<float>(e[i] / sum);
}

}  // namespace

void apply_softmax(Candidates& c) {
  sort_desc(c);
  softmax_in_order(c);
}

void apply_top_p(Candidates& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.size() <= 1) return;
  apply_softmax(c);
  // The cut is decided on unrounded (double) probabilities, as in Sampler's fused path.
  const double max = c.front().logit;
  double total = 0.0;
  for (const TokenCandidate& tc : c) total += weight(tc.logit, max);
  const double target = static_cast<double>(p) * total;
  double cum = 0.0;
  size_t keep = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    cum += weight(c[i].logit, max);
    if (cum >= target && i + 1 >= min_keep) {
      keep = i + 1;
      break;
    }
  }
  c.resize(std::max<size_t>(keep, 1));
}

void apply_min_p(Candidates& c, float p, size_t min_keep) {
  if (p <= 0.0f || c.size() <= 1) return;
  sort_desc(c);
  // p_i >= p * p_max  <=>  exp(logit_i - logit_max) >= p
  const double max = c.front().logit;
  size_t keep = 0;
  while (keep < c.size() && weight(c[keep].logit, max) >= p) ++keep;
  keep = std::max({keep, min_keep, size_t{1}});
  c.resize(std::min(keep, c.size()));
}

void apply_temperature(Candidates& c, float t) {
  if (t <= 0.0f) {
    const auto best = std::min_element(c.begin(), c.end(), better);
    const TokenCandidate only = *best;
    c.assign(1, only);
    return;
  }
  for (TokenCandidate& tc : c) tc.logit /= t;
}

int32_t pick_candidate(const Candidates& c, double u) {
  if (c.empty()) throw std::invalid_argument("sampler: no candidates");
  double total = 0.0;
  for (const TokenCandidate& tc : c) total += tc.p;
  const double target = u * total;
  double cum = 0.0;
  int32_t last_positive = c.front().id;
  for (const TokenCandidate& tc : c) {
    if (tc.p <= 0.0f) continue;
    cum += tc.p;
    last_positive = tc.id;
    if (target < cum) return tc.id;
  }
  return last_positive;  // u * total rounded up to the very end
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("sampler: empty logits");
  size_t best = 0;
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    check_logit(logits[i], i);
    any |= logits[i] != -INFINITY;
    if (logits[i] > logits[best]) best = i;
  }
  if (!any) throw std::invalid_argument("sampler: every logit is -inf");
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplerParams& params) : params_(params) {
  const float fs[] = {params.temp, params.top_p, params.min_p, params.repeat_penalty,
                      params.presence_penalty, params.frequency_penalty};
  for (float f : fs) {
    if (std::isnan(f)) throw std::invalid_argument("sampler: a parameter is NaN");
  }
  if (!(params.repeat_penalty > 0.0f)) {
    throw std::invalid_argument("sampler: repeat_penalty must be > 0, got " +
                                std::to_string(params.repeat_penalty));
  }
  if (params.repeat_last_n < -1) {
    throw std::invalid_argument("sampler: repeat_last_n must be >= -1, got " +
                                std::to_string(params.repeat_last_n));
  }
  seed_ = resolve_seed(params.seed);
  rng_.seed(seed_);
}

Candidates Sampler::filtered(std::span<const float> logits, bool sorted) const {
  check_logits(logits);
  const size_t n = logits.size();
  const float* l = logits.data();
  if (params_.repeat_last_n != 0 && !history_.empty() &&
      (params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
       params_.presence_penalty != 0.0f)) {
    scratch_.v.assign(logits.begin(), logits.end());
    l = scratch_.v.data();
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t t : history_) ++counts[t];
    for (auto [id, cnt] : counts) {
      if (id < 0 || static_cast<size_t>(id) >= n) continue;
      scratch_.v[id] = penalize(scratch_.v[id], cnt, params_.repeat_penalty, params_.frequency_penalty,
                              params_.presence_penalty);
    }
  }

  if (greedy()) {  // argmax, lowest id on ties
    size_t best = 0;
    for (size_t i = 1; i < n; ++i) {
      if (l[i] > l[best]) best = i;
    }
    return Candidates{{static_cast<int32_t>(best), l[best], 1.0f}};
  }

  // top-k: one pass with a min-heap of the k best (heap front = worst kept). Scanning in id order,
  // an equal logit never beats a kept one (its id is higher), so `>` is the whole test.
  Candidates c;
  const auto k = static_cast<size_t>(std::max(params_.top_k, 0));
  if (k > 0 && k < n) {
    c.reserve(k);
    for (size_t i = 0; i < k; ++i) c.push_back({static_cast<int32_t>(i), l[i], 0.0f});
    std::make_heap(c.begin(), c.end(), better);
    float worst = c.front().logit;
    auto scan = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        if (l[i] > worst) {
          std::pop_heap(c.begin(), c.end(), better);
          c.back() = {static_cast<int32_t>(i), l[i], 0.0f};
          std::push_heap(c.begin(), c.end(), better);
          worst = c.front().logit;
        }
      }
    };
    // Blocks whose maximum cannot enter the heap are skipped after one vectorized max.
    constexpr size_t kBlock = 256;
    size_t i = k;
    for (; i + kBlock <= n; i += kBlock) {
      int32_t m = INT32_MIN;
      for (size_t j = i; j < i + kBlock; ++j) m = std::max(m, order_key(l[j]));
      if (m > order_key(worst)) scan(i, i + kBlock);
    }
    scan(i, n);
  } else {
    c.resize(n);
    for (size_t i = 0; i < n; ++i) c[i] = {static_cast<int32_t>(i), l[i], 0.0f};
  }

  // top-p then min-p. Both cut a prefix of the candidates sorted by logit, so the result is the
  // shorter prefix: min-p's set is a threshold (a partition, no sort), and top-p sorts only as much
  // of that set as it needs to reach its mass (measured against the whole top-k set).
  double max = -INFINITY;
  for (const TokenCandidate& tc : c) max = std::max(max, static_cast<double>(tc.logit));
  size_t m = c.size();
  if (params_.min_p > 0.0f) {
    const double p = params_.min_p;
    m = static_cast<size_t>(std::partition(c.begin(), c.end(), [&](const TokenCandidate& tc) {
                              return weight(tc.logit, max) >= p;
                            }) - c.begin());
    // The maximum always passes (weight 1 >= p) unless p > 1; keep at least the best one.
    if (m == 0) {
      sort_range_prefix(c, 0, 1);
      m = 1;
    }
  }
  if (params_.top_p < 1.0f && c.size() > 1) {
    double total = 0.0;
    for (const TokenCandidate& tc : c) total += weight(tc.logit, max);
    const double target = static_cast<double>(params_.top_p) * total;
    // Sort only [0, m); the prefix grows 4x per round.
    const Candidates::iterator set_end = c.begin() + m;
    Candidates head(c.begin(), set_end);
    double cum = 0.0;
    size_t sorted = 0, cut = m;
    for (size_t want = std::min<size_t>(m, 64);; want = std::min(m, want * 4)) {
      sort_range_prefix(head, sorted, want);
      for (size_t i = sorted; i < want; ++i) {
        cum += weight(head[i].logit, max);
        if (cum >= target) {  // min_keep = 1 holds: i + 1 >= 1
          cut = i + 1;
          break;
        }
      }
      sorted = want;
      if (cut != m || want == m) break;
    }
    head.resize(cut);
    c = std::move(head);
  } else {
    c.resize(m);
  }

  if (params_.temp != 1.0f) {
    for (TokenCandidate& tc : c) tc.logit /= params_.temp;
  }
  if (sorted || c.size() <= kSortedPickMax) apply_softmax(c);
  else softmax_in_order(c);
  return c;
}

int32_t Sampler::sample(std::span<const float> logits) {
  const Candidates c = filtered(logits, /*sorted=*/false);
  if (greedy()) return c.front().id;
  return pick_candidate(c, u01(rng_));  // one RNG output per non-greedy draw, always
}

std::vector<float> Sampler::probs(std::span<const float> logits) const {
  const Candidates c = filtered(logits);
  std::vector<float> out(logits.size(), 0.0f);
  for (const TokenCandidate& tc : c) out[tc.id] = tc.p;
  return out;
}

int32_t Sampler::sample_probs(std::span<const float> p) {
  if (p.empty()) throw std::invalid_argument("sampler: empty distribution");
  Candidates c(p.size());
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!std::isfinite(p[i]) || p[i] < 0.0f) {
      throw std::invalid_argument("sampler: probability " + std::to_string(i) +
                                  " is negative or not finite");
    }
    c[i] = {static_cast<int32_t>(i), 0.0f, p[i]};
    sum += p[i];
  }
  if (!(sum > 0.0)) throw std::invalid_argument("sampler: distribution sums to zero");
  return pick_candidate(c, u01(rng_));
}

TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int32_t n_top) {
  if (logits.empty()) throw std::invalid_argument("sampler: empty logits");
  if (id < 0 || static_cast<size_t>(id) >= logits.size())
    throw std::out_of_range("token_logprob: id " + std::to_string(id) + " outside the logits");
  float mx = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    check_logit(logits[i], i);
    mx = std::max(mx, logits[i]);
  }
  if (mx == -INFINITY) throw std::invalid_argument("sampler: every logit is -inf");
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double lse = static_cast<double>(mx) + std::log(sum);
  auto lp = [&](int32_t i) { return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(i)]) - lse); };
  TokenLogprob out;
  out.id = id;
  out.logprob = lp(id);
  const auto k = static_cast<size_t>(std::clamp<int64_t>(n_top, 0, static_cast<int64_t>(logits.size())));
  if (k > 0) {
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    auto higher = [&](int32_t a, int32_t b) {
      const float x = logits[static_cast<size_t>(a)], y = logits[static_cast<size_t>(b)];
      return x != y ? x > y : a < b;
    };
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), higher);
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], lp(ids[i]));
  }
  return out;
}

double Sampler::uniform() { return u01(rng_); }

Sampler Sampler::fork() {
  Sampler child = *this;
  child.rng_.seed(rng_());
  return child;
}

void Sampler::accept(int32_t token) {
  if (params_.repeat_last_n == 0) return;
  history_.push_back(token);
  if (params_.repeat_last_n > 0 && history_.size() > static_cast<size_t>(params_.repeat_last_n)) {
    history_.pop_front();
  }
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(seed_);
}

}  // namespace minfer
