// Decoders of the K-quant super-block formats (256 elements), with ggml's f32 arithmetic
// (dequantize_row_q*_K in ggml-quants.c): the sub-block scale and min are formed first
// (d * sc, dmin * m), then y = scale * q - min.
#include "tensor/quants/internal.h"

namespace minfer::quants {

void dequantize_q2_k(const void* src, float* y, int64_t n) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16(x[i].d);
    const float dmin = f16(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {  // two sub-blocks of 16 share a 32-byte stripe
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          const uint8_t* qp = q + 16 * part;
          for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((qp[l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const void* src, float* y, int64_t n) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16(x[i].d);
    int8_t sc[16];
    unpack_q3_k_scales(x[i].scales, sc);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    int is = 0;
    uint8_t mbit = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, mbit = static_cast<uint8_t>(mbit << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(sc[is++] - 32);
          const uint8_t* qp = q + 16 * part;
          const uint8_t* hp = hm + 16 * part;
          for (int l = 0; l < 16; ++l) {
            const int v = ((qp[l] >> shift) & 3) - ((hp[l] & mbit) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const void* src, float* y, int64_t n) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16(x[i].d);
    const float dmin = f16(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      get_scale_min_k4(is, x[i].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequantize_q5_k(const void* src, float* y, int64_t n) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16(x[i].d);
    const float dmin = f16(x[i].dmin);
    const uint8_t* q = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      get_scale_min_k4(is, x[i].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * static_cast<float>((q[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * static_cast<float>((q[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

void dequantize_q6_k(const void* src, float* y, int64_t n) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void dequantize_q8_k(const void* src, float* y, int64_t n) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQKK)
    for (int j = 0; j < kQKK; ++j) y[j] = x[i].d * static_cast<float>(x[i].qs[j]);
}

}  // namespace minfer::quants
