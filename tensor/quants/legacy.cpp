// Decoders of the 32-element GGUF formats Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1, with ggml's f32
// arithmetic (dequantize_row_* in ggml-quants.c): one int->f32 conversion, one multiply by the
// scale, then (for the _1 formats) one add of the offset.
#include "tensor/quants/internal.h"

namespace minfer::quants {

namespace {

// The 32 five-bit-high flags of a Q5 block, bit e for element e.
inline uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) |
         (static_cast<uint32_t>(qh[2]) << 16) | (static_cast<uint32_t>(qh[3]) << 24);
}

}  // namespace

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQK4_0) {
    const float d = f16(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      dst[j] = static_cast<float>((x[i].qs[j] & 0xF) - 8) * d;
      dst[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQK4_1) {
    const float d = f16(x[i].d);
    const float m = f16(x[i].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      dst[j] = static_cast<float>(x[i].qs[j] & 0xF) * d + m;
      dst[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQK5_0) {
    const float d = f16(x[i].d);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>(((x[i].qs[j] & 0xF) | h0) - 16) * d;
      dst[j + 16] = static_cast<float>(((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQK5_1) {
    const float d = f16(x[i].d);
    const float m = f16(x[i].m);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>((x[i].qs[j] & 0xF) | h0) * d + m;
      dst[j + 16] = static_cast<float>((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQK8_0) {
    const float d = f16(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) dst[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += kQK8_1) {
    const float d = f16(x[i].d);
    for (int j = 0; j < kQK8_1; ++j) dst[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

}  // namespace minfer::quants
