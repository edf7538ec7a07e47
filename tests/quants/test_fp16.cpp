// f16/bf16 conversions (tensor/fp16.h and the bulk row functions) and convert_row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/quants.h"
#include "tensor/quants/internal.h"
#include "quants_test_util.h"

namespace minfer {
namespace {

using namespace test;

bool is_nan16(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }

TEST(QuantsF16, ExhaustiveRoundTripAndHardwareAgreement) {
  std::vector<uint16_t> all(65536), back(65536);
  std::vector<float> f(65536), frow(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  f16_to_f32_row(all.data(), frow.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    f[h] = f16_to_f32(static_cast<uint16_t>(h));
    const float hw = hw_f16(static_cast<uint16_t>(h));
    if (is_nan16(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(std::isnan(f[h]) && std::isnan(frow[h])) << h;
      continue;
    }
    ASSERT_EQ(f32_to_bits(f[h]), f32_to_bits(hw)) << "f16 bits " << h;
    ASSERT_EQ(f32_to_bits(frow[h]), f32_to_bits(hw)) << "f16 bits " << h;
    ASSERT_EQ(f32_to_f16(f[h]), h) << "round trip of " << h;
  }
  f32_to_f16_row(f.data(), back.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    if (is_nan16(static_cast<uint16_t>(h)))
      ASSERT_TRUE(is_nan16(back[h])) << h;
    else
      ASSERT_EQ(back[h], h) << h;
  }
}

TEST(QuantsF16, RoundToNearestEvenOverflowSubnormals) {
  // Halfway between 1 (0x3C00) and the next f16 (1 + 2^-10): ties to even (down); just above
  // rounds up; halfway between 0x3C01 and 0x3C02 rounds up to the even 0x3C02.
  EXPECT_EQ(f32_to_f16(1.f + std::ldexp(1.f, -11)), 0x3C00);
  EXPECT_EQ(f32_to_f16(std::nextafter(1.f + std::ldexp(1.f, -11), 2.f)), 0x3C01);
  EXPECT_EQ(f32_to_f16(1.f + 3 * std::ldexp(1.f, -11)), 0x3C02);
  // Largest finite 65504; halfway to 65536 (65520) overflows to inf, just below stays 65504.
  EXPECT_EQ(f32_to_f16(65504.f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.f), 0x7C00);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.f, 0.f)), 0x7BFF);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_TRUE(is_nan16(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  // Subnormals: 2^-24 is the smallest; half of it ties to even (0); 1.5 * 2^-24 rounds to 2.
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.f, -25), 1.f)), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.f, -25)), 0x0002);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.f, -24)), 0x8001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.f, -24)), 0x03FF);  // largest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(f16_to_f32(0x8000), 0.f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

TEST(QuantsF16, MatchesF16cOnRandomFloats) {
  std::mt19937 rng(test_seed() + 40);
  SCOPED_TRACE(seed_note());
  const int n = 1 << 21;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) {
    // Half random bit patterns, half concentrated around the f16 range and its halfway points.
    if (i % 2 == 0) {
      x[i] = bits_to_f32(static_cast<uint32_t>(rng()));
    } else {
      const uint32_t e = 100 + rng() % 45;  // 2^-27 .. 2^17
      x[i] = bits_to_f32(((rng() & 1u) << 31) | (e << 23) | ((rng() & 0x7FFFFFu) & ~0xFFFu) | (rng() % 2 ? 0x1000u : 0u));
    }
  }
  std::vector<uint16_t> row(n);
  f32_to_f16_row(x.data(), row.data(), n);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const uint16_t hw = hw_to_f16(x[i]);
    const uint16_t sw = f32_to_f16(x[i]);
    if (std::isnan(x[i])) {
      if (!is_nan16(sw) || !is_nan16(row[i])) ++bad;
      continue;
    }
    if (sw != hw || row[i] != hw) {
      if (bad++ < 5) ADD_FAILURE() << "x " << x[i] << " bits " << f32_to_bits(x[i]) << " sw " << sw << " hw " << hw;
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantsBF16, RowsMatchScalar) {
  std::mt19937 rng(test_seed() + 41);
  const int n = 100003;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = bits_to_f32(static_cast<uint32_t>(rng()));
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = bits_to_f32(0x3F808000u);  // exact tie, even -> down
  x[2] = bits_to_f32(0x3F818000u);  // exact tie, odd -> up
  std::vector<uint16_t> row(n);
  f32_to_bf16_row(x.data(), row.data(), n);
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(row[i]))) << i;
      continue;
    }
    ASSERT_EQ(row[i], f32_to_bf16(x[i])) << i;
    // Independent: nearest bf16 in value, ties to even.
    const uint32_t u = f32_to_bits(x[i]);
    const uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    // The step above the largest finite bf16 is 2^128 (where rounding to nearest overflows).
    const auto value = [](uint32_t b) {
      return (b & 0x7FFFFFFFu) == 0x7F800000u ? std::copysign(std::ldexp(1.0, 128), bits_to_f32(b)) : double{bits_to_f32(b)};
    };
    const double dl = std::fabs(static_cast<double>(x[i]) - value(lo));
    const double dh = std::fabs(value(hi) - x[i]);
    uint16_t expect = static_cast<uint16_t>(lo >> 16);
    if (dh < dl || (dh == dl && ((lo >> 16) & 1))) expect = static_cast<uint16_t>(hi >> 16);
    if ((u & 0x7F800000u) == 0x7F800000u) expect = static_cast<uint16_t>(u >> 16);  // inf
    ASSERT_EQ(row[i], expect) << "x bits " << u;
  }
  EXPECT_EQ(row[1], 0x3F80);
  EXPECT_EQ(row[2], 0x3F82);
  std::vector<float> back(n);
  bf16_to_f32_row(row.data(), back.data(), n);
  for (int i = 0; i < n; ++i) {
    if (!std::isnan(back[i])) {
      ASSERT_EQ(f32_to_bits(back[i]), static_cast<uint32_t>(row[i]) << 16);
    }
  }
}

TEST(QuantsConvert, RowConversions) {
  std::mt19937 rng(test_seed() + 42);
  const int64_t n = 256 * 20;  // > one internal 4096 chunk
  const std::vector<float> x = weight_like(rng, n, 0.3f);
  std::vector<uint16_t> h(n), h2(n);
  convert_row(DType::F32, x.data(), DType::F16, h.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(h[i], hw_to_f16(x[i])) << i;
  convert_row(DType::F32, x.data(), DType::F16, h2.data(), n);
  quantize_row(DType::F16, x.data(), h2.data(), n);
  EXPECT_EQ(h, h2);
  std::vector<uint16_t> bf(n);
  quantize_row(DType::BF16, x.data(), bf.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bf[i], f32_to_bf16(x[i])) << i;
  convert_row(DType::F16, h.data(), DType::BF16, bf.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bf[i], f32_to_bf16(hw_f16(h[i]))) << i;
  convert_row(DType::F16, h.data(), DType::F16, h2.data(), n);
  EXPECT_EQ(h, h2);

  // Block destinations: Q8_0 from F16 uses the activation encoder; Q4_K from F32 uses
  // quantize_row; Q6_K -> F32 is dequantize_row; Q4_0 -> Q8_0 goes through f32.
  std::vector<float> hf(n);
  f16_to_f32_row(h.data(), hf.data(), n);
  std::vector<uint8_t> a(dtype_row_size(DType::Q8_0, n)), b(dtype_row_size(DType::Q8_0, n));
  convert_row(DType::F16, h.data(), DType::Q8_0, a.data(), n);
  quantize_row_activations(DType::Q8_0, hf.data(), b.data(), n);
  EXPECT_EQ(a, b);
  std::vector<uint8_t> k1(dtype_row_size(DType::Q4_K, n)), k2(dtype_row_size(DType::Q4_K, n));
  convert_row(DType::F32, x.data(), DType::Q4_K, k1.data(), n);
  quantize_row(DType::Q4_K, x.data(), k2.data(), n);
  EXPECT_EQ(k1, k2);
  std::vector<uint8_t> q6(dtype_row_size(DType::Q6_K, n));
  quantize_row(DType::Q6_K, x.data(), q6.data(), n);
  std::vector<float> y1(n), y2(n);
  convert_row(DType::Q6_K, q6.data(), DType::F32, y1.data(), n);
  dequantize_row(DType::Q6_K, q6.data(), y2.data(), n);
  EXPECT_EQ(y1, y2);
  std::vector<uint8_t> q4(dtype_row_size(DType::Q4_0, n));
  quantize_row(DType::Q4_0, x.data(), q4.data(), n);
  dequantize_row(DType::Q4_0, q4.data(), y1.data(), n);
  quantize_row_activations(DType::Q8_0, y1.data(), b.data(), n);
  convert_row(DType::Q4_0, q4.data(), DType::Q8_0, a.data(), n);
  EXPECT_EQ(a, b);

  std::vector<int32_t> iv = {1, -2, 1 << 30, 7, 0, -9, 3, 5};
  std::vector<float> fv(8);
  convert_row(DType::I32, iv.data(), DType::F32, fv.data(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(fv[i], static_cast<float>(iv[i]));
  EXPECT_THROW(convert_row(DType::F32, fv.data(), DType::I32, iv.data(), 8), std::invalid_argument);
  // Overlapping buffers of different types are refused.
  std::vector<float> buf(64);
  EXPECT_THROW(convert_row(DType::F32, buf.data(), DType::F16, buf.data() + 4, 32), std::invalid_argument);
}

}  // namespace
}  // namespace minfer
