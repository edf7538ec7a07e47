// Statistical tests for the tests: chi-square tails and a two-sample homogeneity test.
#pragma once

#include <cstdint>
#include <map>

namespace minfer::test {

/// Regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a) (Numerical
/// Recipes, §6.2).
double gamma_q(double a, double x);

/// P(X >= chi2) for X ~ chi-square with df degrees of freedom.
double chi2_upper_tail(double chi2, int df);

/// Pearson's chi-square test that two samples (category -> count) come from one distribution
/// (a 2 x K contingency table; categories with fewer than `min_pooled` draws in both samples
/// together are merged into one). Returns the p-value; *df_out gets the degrees of freedom.
double chi2_homogeneity_p(const std::map<int32_t, int64_t>& a, const std::map<int32_t, int64_t>& b,
                          int64_t min_pooled = 20, int* df_out = nullptr);

}  // namespace minfer::test
