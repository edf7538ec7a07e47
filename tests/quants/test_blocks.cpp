// Block sizes, argument checks, and the hand-worked spec cases of the GGUF block formats.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/quants.h"
#include "tensor/quants_blocks.h"
#include "quants_test_util.h"

namespace minfer {
namespace {

using test::poison;

TEST(QuantsBlocks, SizesMatchGgufAndTraits) {
  const struct {
    DType t;
    size_t bytes, struct_size;
    int64_t elems;
  } cases[] = {
      {DType::Q4_0, 18, sizeof(BlockQ4_0), 32}, {DType::Q4_1, 20, sizeof(BlockQ4_1), 32},
      {DType::Q5_0, 22, sizeof(BlockQ5_0), 32}, {DType::Q5_1, 24, sizeof(BlockQ5_1), 32},
      {DType::Q8_0, 34, sizeof(BlockQ8_0), 32}, {DType::Q8_1, 36, sizeof(BlockQ8_1), 32},
      {DType::Q2_K, 84, sizeof(BlockQ2_K), 256}, {DType::Q3_K, 110, sizeof(BlockQ3_K), 256},
      {DType::Q4_K, 144, sizeof(BlockQ4_K), 256}, {DType::Q5_K, 176, sizeof(BlockQ5_K), 256},
      {DType::Q6_K, 210, sizeof(BlockQ6_K), 256}, {DType::Q8_K, 292, sizeof(BlockQ8_K), 256},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.t)));
    EXPECT_EQ(c.struct_size, c.bytes);
    EXPECT_EQ(dtype_type_size(c.t), c.bytes);
    EXPECT_EQ(dtype_block_size(c.t), c.elems);
    EXPECT_EQ(test::block_bytes(c.t), static_cast<int>(c.bytes));
  }
}

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::Q2_K,
                           DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

TEST(QuantsBlocks, PartialBlocksAndBadArgumentsAreRefused) {
  alignas(64) std::vector<uint8_t> buf(4096);
  std::vector<float> f(1024, 1.f);
  for (DType t : kAllTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t bs = dtype_block_size(t);
    if (bs > 1) {
      EXPECT_THROW(dequantize_row(t, buf.data(), f.data(), bs + 1), std::invalid_argument);
      EXPECT_THROW(dequantize_row(t, buf.data(), f.data(), bs / 2), std::invalid_argument);
      EXPECT_THROW(quantize_row(t, f.data(), buf.data(), bs - 1), std::invalid_argument);
      EXPECT_THROW(vec_dot(t, bs + 3, buf.data(), buf.data()), std::invalid_argument);
      EXPECT_THROW(convert_row(DType::F32, f.data(), t, buf.data(), bs + 1), std::invalid_argument);
    }
    EXPECT_THROW(dequantize_row(t, buf.data(), f.data(), -bs), std::invalid_argument);
    EXPECT_THROW(dequantize_row(t, nullptr, f.data(), bs), std::invalid_argument);
    EXPECT_THROW(quantize_row(t, f.data(), nullptr, bs), std::invalid_argument);
    // Misaligned block pointers (every block struct has an f16 or f32 field).
    EXPECT_THROW(dequantize_row(t, buf.data() + 1, f.data(), bs), std::invalid_argument);
    EXPECT_NO_THROW(dequantize_row(t, buf.data(), f.data(), 0));
  }
  EXPECT_THROW(dequantize_row(DType::I64, buf.data(), f.data(), 4), std::invalid_argument);
  EXPECT_THROW(quantize_row(DType::I32, f.data(), buf.data(), 4), std::invalid_argument);
  EXPECT_THROW(vec_dot_type(DType::I8), std::invalid_argument);
  EXPECT_THROW(quantize_row_activations(DType::Q4_0, f.data(), buf.data(), 32), std::invalid_argument);
  EXPECT_THROW(dequantize_row(static_cast<DType>(5), buf.data(), f.data(), 32), std::invalid_argument);
}

TEST(QuantsBlocks, QuantizeRefusesNonFiniteAndHugeInput) {
  alignas(64) std::vector<uint8_t> buf(4096);
  for (DType t : {DType::Q4_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::Q2_K}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t n = dtype_block_size(t);
    std::vector<float> x(static_cast<size_t>(n), 0.5f);
    x[n / 2] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THROW(quantize_row(t, x.data(), buf.data(), n), std::invalid_argument);
    x[n / 2] = -std::numeric_limits<float>::infinity();
    EXPECT_THROW(quantize_row(t, x.data(), buf.data(), n), std::invalid_argument);
    x[n / 2] = 1e30f;  // needs a scale far beyond 65504
    EXPECT_THROW(quantize_row(t, x.data(), buf.data(), n), std::invalid_argument);
  }
}

TEST(QuantsBlocks, VecDotTypes) {
  EXPECT_EQ(vec_dot_type(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(vec_dot_type(DType::Q5_0), DType::Q8_0);
  EXPECT_EQ(vec_dot_type(DType::Q8_0), DType::Q8_0);
  EXPECT_EQ(vec_dot_type(DType::Q4_1), DType::Q8_1);
  EXPECT_EQ(vec_dot_type(DType::Q5_1), DType::Q8_1);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K})
    EXPECT_EQ(vec_dot_type(t), DType::Q8_K);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) EXPECT_EQ(vec_dot_type(t), DType::F32);
}

// Spec case: Q5_0, d = 1, qh = 1 << 16, qs[0] = 0xF0. Element 16 takes the high nibble of qs[0]
// (15) and bit 16 of qh (16): 31 - 16 = 15; every other element is 0 - 16.
TEST(QuantsSpec, Q5_0HighBitPlane) {
  BlockQ5_0 b{};
  b.d = 0x3C00;  // 1.0
  const uint32_t qh = 1u << 16;
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0xF0;
  std::vector<float> y(32);
  poison(y);
  dequantize_row(DType::Q5_0, &b, y.data(), 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], e == 16 ? 15.f : -16.f) << "element " << e;
}

// Spec case: Q4_K, d = 1, dmin = 0, scales = [1,2,3,4,0,0,0,0,5,6,7,8], every qs byte 0x11
// (every level 1): sub-block k has scale k + 1, so y[i] = floor(i / 32) + 1.
TEST(QuantsSpec, Q4_KPackedScales) {
  BlockQ4_K b{};
  b.d = 0x3C00;
  b.dmin = 0;
  const uint8_t sc[12] = {1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8};
  std::memcpy(b.scales, sc, 12);
  std::memset(b.qs, 0x11, sizeof b.qs);
  std::vector<float> y(256);
  poison(y);
  dequantize_row(DType::Q4_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], static_cast<float>(i / 32 + 1)) << "element " << i;

  // The top two bits of scales[0] are bits 4-5 of sub-block 4's scale: 0b10 << 4 | (scales[8]
  // & 15 = 1) = 33.
  b.scales[0] = static_cast<uint8_t>(b.scales[0] | 0x80);
  b.scales[8] = 1;
  poison(y);
  dequantize_row(DType::Q4_K, &b, y.data(), 256);
  for (int i = 128; i < 160; ++i) EXPECT_EQ(y[i], 33.f) << "element " << i;
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 1.f) << "element " << i;  // low 6 bits unchanged
}

// Spec case: Q5_K, d = 1, dmin = 0, scales = [1,1,1,1,0,0,0,0,1,1,1,1], qs[0] = 0x21,
// qh[0] = 0x02. y[0] = low nibble 1; y[1] = 0; y[32] = high nibble 2 + bit 1 of qh[0] (16) = 18.
TEST(QuantsSpec, Q5_KHighBits) {
  BlockQ5_K b{};
  b.d = 0x3C00;
  const uint8_t sc[12] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
  std::memcpy(b.scales, sc, 12);
  b.qs[0] = 0x21;
  b.qh[0] = 0x02;
  std::vector<float> y(256);
  poison(y);
  dequantize_row(DType::Q5_K, &b, y.data(), 256);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[32], 18.f);
  for (int i = 0; i < 256; ++i) {
    if (i != 0 && i != 32) {
      EXPECT_EQ(y[i], 0.f) << "element " << i;
    }
  }
}

// Q6_K: level 63 with scale -2 and d = 0.5: (0.5 * -2) * (63 - 32) = -31; ql/qh of element 200
// (second half, w = 72: high nibble of ql[64 + 8], 2-bit field 2 of qh[32 + 8]).
TEST(QuantsSpec, Q6_KElementPlacement) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  for (auto& s : b.scales) s = -2;
  // All levels 32 (value 0): ql nibbles 0, qh fields 2 (binary 10).
  std::memset(b.qh, 0xAA, sizeof b.qh);
  b.ql[64 + 8] = 0xF0;
  b.qh[32 + 8] = static_cast<uint8_t>((0xAA & ~(3 << 4)) | (3 << 4));
  std::vector<float> y(256);
  poison(y);
  dequantize_row(DType::Q6_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], i == 200 ? -31.f : 0.f) << "element " << i;
}

// Q3_K: scale 6 bits split over two places, high-bit mask subtracts 4 when clear.
TEST(QuantsSpec, Q3_KScalesAndHmask) {
  BlockQ3_K b{};
  b.d = 0x3C00;
  // Sub-block 13: low nibble in the high nibble of scales[5], top bits in bits 6-7 of
  // scales[9]. Scale 0b11'0101 = 53 -> 53 - 32 = 21. Every other scale byte 0 -> -32.
  b.scales[5] = 0x50;
  b.scales[9] = 0xC0;
  std::memset(b.hmask, 0xFF, sizeof b.hmask);  // high bits set: levels 0..3 unchanged
  // Element 13 * 16 + 3 = 211: qs byte 32 + 211 % 32 = 51, field (211 % 128) / 32 = 2.
  b.qs[51] = 3 << 4;
  b.hmask[211 % 32] = static_cast<uint8_t>(0xFF & ~(1 << (211 / 32)));  // clear: 3 - 4 = -1
  std::vector<float> y(256);
  poison(y);
  dequantize_row(DType::Q3_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], i == 211 ? -21.f : 0.f) << "element " << i;
}

// Q2_K: 4-bit scale and min per 16; y = d * sc * q - dmin * m.
TEST(QuantsSpec, Q2_KScaleMinNibbles) {
  BlockQ2_K b{};
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>((j % 16) | ((15 - j) << 4));
  // Element 150: qs byte 32 + 150 % 32 = 54, field (150 % 128) / 32 = 0 -> level 3.
  b.qs[54] = 3;
  std::vector<float> y(256);
  poison(y);
  dequantize_row(DType::Q2_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 16;
    const float expect = (i == 150 ? 3.f * static_cast<float>(j) : 0.f) - 0.5f * static_cast<float>(15 - j);
    EXPECT_EQ(y[i], expect) << "element " << i;
  }
}

// A row of several blocks with different known contents decodes every block, not only the
// first.
TEST(QuantsSpec, EveryBlockOfARowIsDecoded) {
  {
    std::vector<BlockQ4_0> row(3);
    for (int k = 0; k < 3; ++k) {
      row[k].d = f32_to_f16(static_cast<float>(k + 1));
      for (int j = 0; j < 16; ++j) row[k].qs[j] = static_cast<uint8_t>(((k + 9) & 0xF) | (((7 - k) & 0xF) << 4));
    }
    std::vector<float> y(96);
    poison(y);
    dequantize_row(DType::Q4_0, row.data(), y.data(), 96);
    for (int k = 0; k < 3; ++k)
      for (int e = 0; e < 32; ++e) {
        const float lvl = e < 16 ? static_cast<float>(k + 9 - 8) : static_cast<float>(7 - k - 8);
        EXPECT_EQ(y[32 * k + e], lvl * static_cast<float>(k + 1)) << "block " << k << " element " << e;
      }
  }
  {
    std::vector<BlockQ8_0> row(4);
    for (int k = 0; k < 4; ++k) {
      row[k].d = f32_to_f16(0.25f * static_cast<float>(k + 1));
      for (int e = 0; e < 32; ++e) row[k].qs[e] = static_cast<int8_t>(e - 16 + k);
    }
    std::vector<float> y(128);
    poison(y);
    dequantize_row(DType::Q8_0, row.data(), y.data(), 128);
    for (int k = 0; k < 4; ++k)
      for (int e = 0; e < 32; ++e)
        EXPECT_EQ(y[32 * k + e], static_cast<float>(e - 16 + k) * 0.25f * static_cast<float>(k + 1));
  }
  {
    std::vector<BlockQ4_K> row(2);
    for (int k = 0; k < 2; ++k) {
      row[k] = BlockQ4_K{};
      row[k].d = f32_to_f16(static_cast<float>(k + 2));
      for (int j = 0; j < 4; ++j) row[k].scales[j] = 1;
      for (int j = 8; j < 12; ++j) row[k].scales[j] = 1;
      std::memset(row[k].qs, k == 0 ? 0x21 : 0x43, sizeof row[k].qs);
    }
    std::vector<float> y(512);
    poison(y);
    dequantize_row(DType::Q4_K, row.data(), y.data(), 512);
    for (int i = 0; i < 512; ++i) {
      const int k = i / 256, w = i % 256;
      const int q = k == 0 ? ((w % 64) < 32 ? 1 : 2) : ((w % 64) < 32 ? 3 : 4);
      EXPECT_EQ(y[i], static_cast<float>((k + 2) * q)) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace minfer
