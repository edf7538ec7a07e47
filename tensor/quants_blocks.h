// Byte layouts of the GGUF block formats (ggml-common.h). Every struct is a plain byte image of
// one block as stored in a GGUF file (little-endian); f16 fields are IEEE binary16 bit patterns
// (decode with f16_to_f32 from tensor/fp16.h). Element order inside a block is described per
// struct; "element e" means the e-th value of the block in row order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace minfer {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQKK = static_cast<int>(kQK_K);  // 256, K-quant super-block

/// Q4_0: y[e] = (q[e] - 8) * d. Element j (j < 16) is the low nibble of qs[j], element j + 16
/// the high nibble of qs[j].
struct BlockQ4_0 {
  uint16_t d;                // f16 scale
  uint8_t qs[kQK4_0 / 2];    // 4-bit quants
};

/// Q4_1: y[e] = q[e] * d + m. Nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;                // f16 scale
  uint16_t m;                // f16 offset (the block minimum)
  uint8_t qs[kQK4_1 / 2];
};

/// Q5_0: y[e] = (q[e] - 16) * d with q[e] = low 4 bits from qs (nibble order as Q4_0) | bit e of
/// the little-endian u32 qh as bit 4.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];             // bit e = 5th bit of element e
  uint8_t qs[kQK5_0 / 2];
};

/// Q5_1: y[e] = q[e] * d + m, bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};

/// Q8_0: y[e] = qs[e] * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};

/// Q8_1: y[e] = qs[e] * d; s = d * sum(qs) (f16), kept for format compatibility.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK8_1];
};

/// Q2_K: 16 sub-blocks of 16. Sub-block j: scale = d * (scales[j] & 15), min = dmin *
/// (scales[j] >> 4); y = scale * q - min with q the 2-bit value. Element e lives in
/// qs[32 * (e / 128) + e % 32] at bit shift 2 * ((e % 128) / 32).
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];  // 4-bit scale (low) and 4-bit min (high) per sub-block
  uint8_t qs[kQKK / 4];       // 2-bit quants
  uint16_t d;                 // f16 super-block scale of the scales
  uint16_t dmin;              // f16 super-block scale of the mins
};

/// Q3_K: 16 sub-blocks of 16, symmetric. Sub-block j: 6-bit scale s_j (see docs/quants.md for
/// the 12-byte packing), y = d * (s_j - 32) * (q - 4 * !hbit) with q the 2-bit value placed as
/// in Q2_K and hbit = bit (e / 32) of hmask[e % 32].
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];    // high bit of each quant
  uint8_t qs[kQKK / 4];       // low 2 bits
  uint8_t scales[12];         // 16 6-bit scales
  uint16_t d;                 // f16 super-block scale
};

/// Q4_K: 8 sub-blocks of 32 with 6-bit scale sc_j and 6-bit min m_j packed in `scales`
/// (get_scale_min_k4 in ggml): y = (d * sc_j) * q - (dmin * m_j). Element e lives in
/// qs[32 * (e / 64) + e % 32], low nibble when (e % 64) < 32, else the high nibble.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQKK / 2];
};

/// Q5_K: Q4_K plus a fifth bit: bit (e / 32) of qh[e % 32].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};

/// Q6_K: 16 sub-blocks of 16 with int8 scales: y = (d * scales[e / 16]) * (q - 32). The low
/// 4 bits of element e are in ql[64 * (e / 128) + e % 64] (low nibble when (e % 128) < 64), the
/// high 2 bits in qh[32 * (e / 128) + e % 32] at shift 2 * ((e % 128) / 32).
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};

/// Q8_K: activations for K-quant dot products. y[e] = d * qs[e]; bsums[j] = sum of qs[16j..16j+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 2);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace minfer
