// vec_dot against the double-precision dot of the dequantized operands, the AVX2 kernels
// against the scalar ones, and exact integer sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/quants.h"
#include "tensor/quants/internal.h"
#include "quants_test_util.h"

namespace minfer {
namespace {

using namespace test;

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                              DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::Q2_K,
                              DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

// Offsets of the f16 scale fields in a block (Q8_K: f32 d at 0).
std::vector<int> scale_fields(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: return {0};
    case DType::Q4_1: case DType::Q5_1: case DType::Q8_1: case DType::Q4_K: case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

// A weight row: random bytes with random modest scales (random_bits) or a quantized
// weight-like row.
std::vector<uint8_t> weight_row(DType t, int64_t n, std::mt19937& rng, bool random_bits) {
  std::vector<uint8_t> w(dtype_row_size(t, n));
  if (random_bits && dtype_is_quantized(t)) {
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const int bs = block_bytes(t);
    for (size_t k = 0; k < w.size() / bs; ++k) {
      for (int off : scale_fields(t)) wr16(w.data() + k * bs + off, random_scale_f16(rng, 0.001f, 0.1f));
      if (t == DType::Q8_K) {
        const float d = std::uniform_real_distribution<float>(0.001f, 0.1f)(rng);
        std::memcpy(w.data() + k * bs, &d, 4);
      }
    }
  } else {
    const std::vector<float> x = weight_like(rng, n, 0.05f);
    quantize_row(t, x.data(), w.data(), n);
  }
  return w;
}

std::vector<float> decode(DType t, const void* p, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  poison(y);
  dequantize_row(t, p, y.data(), n);
  return y;
}

TEST(QuantsDot, MatchesDoubleDotOfDequantizedOperands) {
  std::mt19937 rng(test_seed() + 30);
  SCOPED_TRACE(seed_note());
  for (DType t : kWeightTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const DType at = vec_dot_type(t);
    for (int rep = 0; rep < 12; ++rep) {
      const int64_t n = dtype_block_size(t) == 256 ? 256 * (1 + rep % 5) : (rep == 0 ? 32 : 32 * (1 + rep * 7));
      const auto w = weight_row(t, n, rng, rep % 2 == 1);
      std::vector<float> xa = weight_like(rng, n, 1.5f);
      std::vector<uint8_t> a(dtype_row_size(at, n));
      quantize_row_activations(at, xa.data(), a.data(), n);
      const std::vector<float> wf = decode(t, w.data(), n), af = decode(at, a.data(), n);
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref += static_cast<double>(wf[i]) * af[i];
        mag += std::fabs(static_cast<double>(wf[i]) * af[i]);
      }
      const float got = vec_dot(t, n, w.data(), a.data());
      const float scalar = quants::vec_dot_scalar(t, n, w.data(), a.data());
      EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-30) << "n " << n << " rep " << rep;
      EXPECT_NEAR(scalar, ref, 1e-5 * mag + 1e-30) << "n " << n << " rep " << rep;
      // AVX2 and scalar differ only in the f32 accumulation order.
      if (quants::DotFn simd = quants::dot_avx2_fn(t)) {
        EXPECT_NEAR(simd(n, w.data(), a.data()), scalar, 2e-6 * mag + 1e-30) << "n " << n;
      }
    }
  }
}

// With unit scales and small activations every partial sum is an integer below 2^24, so the
// AVX2 and scalar kernels must agree exactly with the exact integer dot.
TEST(QuantsDot, IntegerSumsExactAndIdenticalAcrossKernels) {
  std::mt19937 rng(test_seed() + 31);
  SCOPED_TRACE(seed_note());
  for (DType t : kWeightTypes) {
    if (!dtype_is_quantized(t)) continue;
    SCOPED_TRACE(std::string(dtype_name(t)));
    const DType at = vec_dot_type(t);
    const bool k = dtype_block_size(t) == 256;
    const int64_t n = k ? 512 : 256;
    std::vector<uint8_t> w(dtype_row_size(t, n));
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const int bs = block_bytes(t), abs_ = block_bytes(at), qk = block_elems(t);
    for (int64_t b = 0; b < n / qk; ++b) {
      for (int off : scale_fields(t)) wr16(w.data() + b * bs + off, 0x3C00);
      if (t == DType::Q8_K) {
        const float one = 1.f;
        std::memcpy(w.data() + b * bs, &one, 4);
      }
    }
    // Activations: full int8 range (including -128) for 32-blocks, [-3, 3] for K super-blocks.
    std::vector<uint8_t> a(dtype_row_size(at, n));
    for (int64_t b = 0; b < n / qk; ++b) {
      uint8_t* p = a.data() + b * abs_;
      if (at == DType::Q8_K) {
        const float one = 1.f;
        std::memcpy(p, &one, 4);
        for (int j = 0; j < 256; ++j) p[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(rng() % 7) - 3));
        for (int g = 0; g < 16; ++g) {
          int s = 0;
          for (int j = 0; j < 16; ++j) s += static_cast<int8_t>(p[4 + 16 * g + j]);
          const int16_t v = static_cast<int16_t>(s);
          std::memcpy(p + 260 + 2 * g, &v, 2);
        }
      } else {
        wr16(p, 0x3C00);
        const int qoff = at == DType::Q8_1 ? 4 : 2;
        for (int j = 0; j < 32; ++j) p[qoff + j] = static_cast<uint8_t>(rng());
        if (at == DType::Q8_1) wr16(p + 2, 0x7E00);  // s is not read: a NaN here must not matter
      }
    }
    // Exact reference from the spec decoder (all values are integers).
    const std::vector<float> wf = spec_decode(t, w.data(), n), af = spec_decode(at, a.data(), n);
    double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(wf[i]) * af[i];
    ASSERT_LT(std::fabs(exact), 16777216.0);
    const float scalar = quants::vec_dot_scalar(t, n, w.data(), a.data());
    EXPECT_EQ(scalar, static_cast<float>(exact));
    if (quants::DotFn simd = quants::dot_avx2_fn(t)) {
      EXPECT_EQ(simd(n, w.data(), a.data()), scalar);
    }
    EXPECT_EQ(vec_dot(t, n, w.data(), a.data()), scalar);
  }
}

TEST(QuantsDot, AvxKernelsPresentForTheRequiredTypes) {
#if defined(__AVX2__)
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q5_0, DType::F32,
                  DType::F16, DType::BF16})
    EXPECT_NE(quants::dot_avx2_fn(t), nullptr) << dtype_name(t);
#else
  GTEST_SKIP() << "built without AVX2";
#endif
}

TEST(QuantsDot, FloatDotsWithOddLengths) {
  std::mt19937 rng(test_seed() + 32);
  for (int64_t n : {1, 7, 8, 31, 33, 1000}) {
    const std::vector<float> x = weight_like(rng, n), y = weight_like(rng, n);
    std::vector<uint16_t> h(static_cast<size_t>(n)), bf(static_cast<size_t>(n));
    f32_to_f16_row(x.data(), h.data(), n);
    f32_to_bf16_row(x.data(), bf.data(), n);
    double r32 = 0, r16 = 0, rbf = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      r32 += static_cast<double>(x[i]) * y[i];
      r16 += static_cast<double>(hw_f16(h[i])) * y[i];
      uint32_t u = static_cast<uint32_t>(bf[i]) << 16;
      float b;
      std::memcpy(&b, &u, 4);
      rbf += static_cast<double>(b) * y[i];
      mag += std::fabs(static_cast<double>(x[i]) * y[i]);
    }
    EXPECT_NEAR(vec_dot(DType::F32, n, x.data(), y.data()), r32, 1e-6 * mag) << n;
    EXPECT_NEAR(vec_dot(DType::F16, n, h.data(), y.data()), r16, 1e-6 * mag) << n;
    EXPECT_NEAR(vec_dot(DType::BF16, n, bf.data(), y.data()), rbf, 1e-6 * mag) << n;
    EXPECT_NEAR(quants::vec_dot_scalar(DType::F16, n, h.data(), y.data()), r16, 1e-6 * mag) << n;
  }
}

TEST(QuantsDot, UncheckedFunctionsMatch) {
  std::mt19937 rng(test_seed() + 33);
  const int64_t n = 512;
  for (DType t : kWeightTypes) {
    const DType at = vec_dot_type(t);
    const auto w = weight_row(t, n, rng, false);
    const std::vector<float> xa = weight_like(rng, n);
    std::vector<uint8_t> a(dtype_row_size(at, n)), a2(dtype_row_size(at, n));
    quantize_row_activations(at, xa.data(), a.data(), n);
    quantize_row_activations_function(at)(xa.data(), a2.data(), n);
    EXPECT_EQ(a, a2);
    EXPECT_EQ(vec_dot_function(t)(n, w.data(), a.data()), vec_dot(t, n, w.data(), a.data()));
    std::vector<float> y1(static_cast<size_t>(n)), y2(static_cast<size_t>(n));
    dequantize_row(t, w.data(), y1.data(), n);
    dequantize_row_function(t)(w.data(), y2.data(), n);
    EXPECT_EQ(y1, y2);
  }
}

}  // namespace
}  // namespace minfer
