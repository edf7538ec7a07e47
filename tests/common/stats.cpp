#include "common/stats.h"

#include <cmath>
#include <utility>
#include <vector>

namespace minfer::test {

// Regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a): the series of
// P(a, x) for x < a + 1, the modified Lentz continued fraction otherwise (Numerical Recipes in C,
// 2nd ed., §6.2, gser and gcf; 3rd ed. §6.2 Gamma::gser / gcf).
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double front = std::exp(-x + a * std::log(x) - std::lgamma(a));
  constexpr double kEps = 1e-15, kTiny = 1e-300;
  if (x < a + 1) {
    double ap = a, del = 1.0 / a, sum = del;
    for (int n = 0; n < 10000 && std::fabs(del) > std::fabs(sum) * kEps; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
    }
    return 1.0 - sum * front;
  }
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return front * h;
}

double chi2_upper_tail(double chi2, int df) { return gamma_q(df / 2.0, chi2 / 2.0); }


double chi2_homogeneity_p(const std::map<int32_t, int64_t>& a, const std::map<int32_t, int64_t>& b, int64_t min_pooled,
                          int* df_out) {
  int64_t na = 0, nb = 0;
  for (auto& [k, v] : a) na += v;
  for (auto& [k, v] : b) nb += v;
  // Categories with few pooled counts are merged into one, so every expected count is large
  // enough for the chi-square approximation.
  std::map<int32_t, int64_t> pooled;
  for (auto& [k, v] : a) pooled[k] += v;
  for (auto& [k, v] : b) pooled[k] += v;
  std::vector<std::pair<double, double>> cells;  // (count in a, count in b)
  double ra = 0, rb = 0;
  for (auto& [k, v] : pooled) {
    const double ca = a.count(k) ? static_cast<double>(a.at(k)) : 0.0, cb = b.count(k) ? static_cast<double>(b.at(k)) : 0.0;
    if (v >= min_pooled) cells.emplace_back(ca, cb);
    else ra += ca, rb += cb;
  }
  if (ra + rb > 0) cells.emplace_back(ra, rb);
  const double n = static_cast<double>(na + nb);
  double chi2 = 0;
  for (auto [ca, cb] : cells) {
    const double tot = ca + cb, ea = tot * static_cast<double>(na) / n, eb = tot * static_cast<double>(nb) / n;
    chi2 += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
  }
  const int df = static_cast<int>(cells.size()) - 1;
  if (df_out) *df_out = df;
  return df > 0 ? chi2_upper_tail(chi2, df) : 1.0;
}

}  // namespace minfer::test
