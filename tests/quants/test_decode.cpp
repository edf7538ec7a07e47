// dequantize_row against the independent spec decoder of quants_test_util.h, bit for bit, on
// random blocks: random bytes for quants and packed scales, random finite f16 scales.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tensor/quants.h"
#include "quants_test_util.h"

namespace minfer {
namespace {

using namespace test;

// Random block bytes with finite scale fields at the type's f16 (or f32) offsets.
std::vector<uint8_t> random_blocks(DType t, int nblocks, std::mt19937& rng, bool modest_scales) {
  const int bs = block_bytes(t);
  std::vector<uint8_t> buf(static_cast<size_t>(bs) * nblocks + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<int> f16_fields;
  switch (t) {
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: f16_fields = {0}; break;
    case DType::Q4_1: case DType::Q5_1: case DType::Q8_1: case DType::Q4_K: case DType::Q5_K: f16_fields = {0, 2}; break;
    case DType::Q2_K: f16_fields = {80, 82}; break;
    case DType::Q3_K: f16_fields = {108}; break;
    case DType::Q6_K: f16_fields = {208}; break;
    default: break;
  }
  for (int k = 0; k < nblocks; ++k) {
    uint8_t* b = buf.data() + static_cast<size_t>(k) * bs;
    for (int off : f16_fields)
      wr16(b + off, modest_scales ? random_scale_f16(rng, 0.001f, 2.f) : random_finite_f16(rng));
    if (t == DType::Q8_K) {
      std::uniform_real_distribution<float> u(-3.f, 3.f);
      const float d = modest_scales ? u(rng) : std::ldexp(u(rng), static_cast<int>(rng() % 200) - 100);
      std::memcpy(b, &d, 4);
      // Consistent bsums (the dot products read them).
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int j = 0; j < 16; ++j) s += static_cast<int8_t>(b[4 + 16 * g + j]);
        const int16_t v = static_cast<int16_t>(s);
        std::memcpy(b + 260 + 2 * g, &v, 2);
      }
    }
  }
  return buf;
}

const DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1,
                             DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

TEST(QuantsDecode, MatchesSpecDecoderBitExact) {
  std::mt19937 rng(test_seed());
  SCOPED_TRACE(seed_note());
  for (DType t : kBlockTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    for (int rep = 0; rep < 20; ++rep) {
      const int nblocks = 1 + rep % 7;
      const bool modest = rep % 2 == 0;
      const auto buf = random_blocks(t, nblocks, rng, modest);
      const int64_t n = static_cast<int64_t>(nblocks) * block_elems(t);
      std::vector<float> y(static_cast<size_t>(n));
      poison(y);
      dequantize_row(t, buf.data(), y.data(), n);
      const std::vector<float> ref = spec_decode(t, buf.data(), n);
      int mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_FALSE(std::isnan(y[i])) << "element " << i << " not written";
        uint32_t a, b;
        std::memcpy(&a, &y[i], 4);
        std::memcpy(&b, &ref[i], 4);
        if (a != b && mismatches++ < 5)
          ADD_FAILURE() << "element " << i << " (block " << i / block_elems(t) << "): got " << y[i] << " spec "
                        << ref[i];
      }
      ASSERT_EQ(mismatches, 0);
    }
  }
}

TEST(QuantsDecode, ShortRowLeavesTheRestUntouched) {
  std::mt19937 rng(test_seed() + 1);
  for (DType t : kBlockTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const auto buf = random_blocks(t, 3, rng, true);
    const int qk = block_elems(t);
    std::vector<float> y(static_cast<size_t>(3 * qk));
    poison(y);
    dequantize_row(t, buf.data(), y.data(), 2 * qk);
    for (int i = 0; i < 2 * qk; ++i) ASSERT_FALSE(std::isnan(y[i])) << i;
    for (int i = 2 * qk; i < 3 * qk; ++i) ASSERT_TRUE(std::isnan(y[i])) << i;
  }
}

TEST(QuantsDecode, FloatTypes) {
  std::mt19937 rng(test_seed() + 2);
  const int n = 1003;  // odd: exercises the SIMD tails
  std::vector<uint16_t> h(n);
  std::vector<int32_t> iv(n);
  std::vector<float> f(n);
  for (int i = 0; i < n; ++i) {
    h[i] = random_finite_f16(rng);
    iv[i] = static_cast<int32_t>(rng());
    f[i] = std::ldexp(static_cast<float>(static_cast<int32_t>(rng())), -20);
  }
  std::vector<float> y(n);
  poison(y);
  dequantize_row(DType::F16, h.data(), y.data(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], hw_f16(h[i])) << i;
  poison(y);
  dequantize_row(DType::BF16, h.data(), y.data(), n);
  for (int i = 0; i < n; ++i) {
    uint32_t u = static_cast<uint32_t>(h[i]) << 16;
    float e;
    std::memcpy(&e, &u, 4);
    ASSERT_EQ(y[i], e) << i;
  }
  poison(y);
  dequantize_row(DType::I32, iv.data(), y.data(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], static_cast<float>(iv[i])) << i;
  poison(y);
  dequantize_row(DType::F32, f.data(), y.data(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], f[i]) << i;
}

}  // namespace
}  // namespace minfer
