// Reference (scalar) dot products: weight row x activation row encoded as vec_dot_type.
// Each block's integer sum of products is exact in int32; the block's scales are applied once
// per block (or per sub-block sum) and accumulated in f32.
#include "tensor/quants/internal.h"

namespace minfer::quants {

namespace {

// Levels of one K-quant super-block as signed integers such that the decoded value of element e
// is (sub-block scale) * q[e] - (sub-block min), i.e. offsets already applied for the symmetric
// formats and not applied (mins handled separately) for Q2_K/Q4_K/Q5_K.
void unpack_q2_k(const BlockQ2_K& b, int8_t* q) {
  for (int e = 0; e < kQKK; ++e)
    q[e] = static_cast<int8_t>((b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
}

void unpack_q3_k(const BlockQ3_K& b, int8_t* q) {
  for (int e = 0; e < kQKK; ++e) {
    const int lo = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    const int hi = (b.hmask[e % 32] >> (e / 32)) & 1;
    q[e] = static_cast<int8_t>(lo - (hi ? 0 : 4));
  }
}

void unpack_q4_k(const BlockQ4_K& b, int8_t* q) {
  for (int e = 0; e < kQKK; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    q[e] = static_cast<int8_t>((e % 64) < 32 ? (byte & 0xF) : (byte >> 4));
  }
}

void unpack_q5_k(const BlockQ5_K& b, int8_t* q) {
  for (int e = 0; e < kQKK; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    const int lo = (e % 64) < 32 ? (byte & 0xF) : (byte >> 4);
    q[e] = static_cast<int8_t>(lo | (((b.qh[e % 32] >> (e / 32)) & 1) << 4));
  }
}

void unpack_q6_k(const BlockQ6_K& b, int8_t* q) {
  for (int e = 0; e < kQKK; ++e) {
    const int w = e % 128;
    const uint8_t lb = b.ql[64 * (e / 128) + w % 64];
    const int lo = w < 64 ? (lb & 0xF) : (lb >> 4);
    const int hi = (b.qh[32 * (e / 128) + w % 32] >> (2 * (w / 32))) & 3;
    q[e] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

inline int dot_i8(const int8_t* a, const int8_t* b, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline int sum_i8(const int8_t* a, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += a[i];
  return s;
}

// The 32 levels of a 4/5-bit legacy block, without offset (0..15 or 0..31).
inline void unpack_legacy(const uint8_t* qs, const uint8_t* qh, int8_t* q) {
  uint32_t h = 0;
  if (qh) h = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (static_cast<uint32_t>(qh[3]) << 24);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0xF) | (((h >> j) & 1) << 4));
    q[j + 16] = static_cast<int8_t>((qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4));
  }
}

}  // namespace

float dot_f32_scalar(int64_t n, const void* xv, const void* yv) {
  const auto* x = static_cast<const float*>(xv);
  const auto* y = static_cast<const float*>(yv);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

float dot_f16_scalar(int64_t n, const void* xv, const void* yv) {
  const auto* x = static_cast<const uint16_t*>(xv);
  const auto* y = static_cast<const float*>(yv);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += f16_to_f32(x[i]) * y[i];
  return s;
}

float dot_bf16_scalar(int64_t n, const void* xv, const void* yv) {
  const auto* x = static_cast<const uint16_t*>(xv);
  const auto* y = static_cast<const float*>(yv);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += bf16_to_f32(x[i]) * y[i];
  return s;
}

float dot_q4_0_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ4_0*>(xv);
  const auto* y = static_cast<const BlockQ8_0*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[32];
    unpack_legacy(x[i].qs, nullptr, q);
    const int sumi = dot_i8(q, y[i].qs, 32) - 8 * sum_i8(y[i].qs, 32);
    s += (f16(x[i].d) * f16(y[i].d)) * static_cast<float>(sumi);
  }
  return s;
}

float dot_q5_0_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ5_0*>(xv);
  const auto* y = static_cast<const BlockQ8_0*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[32];
    unpack_legacy(x[i].qs, x[i].qh, q);
    const int sumi = dot_i8(q, y[i].qs, 32) - 16 * sum_i8(y[i].qs, 32);
    s += (f16(x[i].d) * f16(y[i].d)) * static_cast<float>(sumi);
  }
  return s;
}

// The _1 formats add m * sum(activation): the sum is taken from the quants (exact) rather than
// from the f16 field s, which carries a 2^-11 relative rounding.
float dot_q4_1_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ4_1*>(xv);
  const auto* y = static_cast<const BlockQ8_1*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[32];
    unpack_legacy(x[i].qs, nullptr, q);
    const float dy = f16(y[i].d);
    s += (f16(x[i].d) * dy) * static_cast<float>(dot_i8(q, y[i].qs, 32)) +
         (f16(x[i].m) * dy) * static_cast<float>(sum_i8(y[i].qs, 32));
  }
  return s;
}

float dot_q5_1_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ5_1*>(xv);
  const auto* y = static_cast<const BlockQ8_1*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[32];
    unpack_legacy(x[i].qs, x[i].qh, q);
    const float dy = f16(y[i].d);
    s += (f16(x[i].d) * dy) * static_cast<float>(dot_i8(q, y[i].qs, 32)) +
         (f16(x[i].m) * dy) * static_cast<float>(sum_i8(y[i].qs, 32));
  }
  return s;
}

float dot_q8_0_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ8_0*>(xv);
  const auto* y = static_cast<const BlockQ8_0*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i)
    s += (f16(x[i].d) * f16(y[i].d)) * static_cast<float>(dot_i8(x[i].qs, y[i].qs, 32));
  return s;
}

float dot_q8_1_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / 32;
  const auto* x = static_cast<const BlockQ8_1*>(xv);
  const auto* y = static_cast<const BlockQ8_1*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i)
    s += (f16(x[i].d) * f16(y[i].d)) * static_cast<float>(dot_i8(x[i].qs, y[i].qs, 32));
  return s;
}

float dot_q2_k_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ2_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[kQKK];
    unpack_q2_k(x[i], q);
    int isum = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      isum += (x[i].scales[j] & 0xF) * dot_i8(q + 16 * j, y[i].qs + 16 * j, 16);
      summ += (x[i].scales[j] >> 4) * y[i].bsums[j];
    }
    s += (y[i].d * f16(x[i].d)) * static_cast<float>(isum) - (y[i].d * f16(x[i].dmin)) * static_cast<float>(summ);
  }
  return s;
}

float dot_q3_k_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ3_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[kQKK], sc[16];
    unpack_q3_k(x[i], q);
    unpack_q3_k_scales(x[i].scales, sc);
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += (sc[j] - 32) * dot_i8(q + 16 * j, y[i].qs + 16 * j, 16);
    s += (y[i].d * f16(x[i].d)) * static_cast<float>(isum);
  }
  return s;
}

namespace {

// Q4_K and Q5_K share the dot: 8 sub-blocks of 32 with a 6-bit scale and min each; the mins
// multiply the activation block sums. Only the unpacking of the quants differs.
template <typename Block, void (*Unpack)(const Block&, int8_t*)>
float dot_k4_scale_min(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const Block*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[kQKK];
    Unpack(x[i], q);
    int isum = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      isum += sc * dot_i8(q + 32 * j, y[i].qs + 32 * j, 32);
      summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    s += (y[i].d * f16(x[i].d)) * static_cast<float>(isum) - (y[i].d * f16(x[i].dmin)) * static_cast<float>(summ);
  }
  return s;
}

}  // namespace

float dot_q4_k_scalar(int64_t n, const void* xv, const void* yv) {
  return dot_k4_scale_min<BlockQ4_K, unpack_q4_k>(n, xv, yv);
}

float dot_q5_k_scalar(int64_t n, const void* xv, const void* yv) {
  return dot_k4_scale_min<BlockQ5_K, unpack_q5_k>(n, xv, yv);
}

float dot_q6_k_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ6_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t q[kQKK];
    unpack_q6_k(x[i], q);
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += x[i].scales[j] * dot_i8(q + 16 * j, y[i].qs + 16 * j, 16);
    s += (y[i].d * f16(x[i].d)) * static_cast<float>(isum);
  }
  return s;
}

float dot_q8_k_scalar(int64_t n, const void* xv, const void* yv) {
  const int64_t nb = n / kQKK;
  const auto* x = static_cast<const BlockQ8_K*>(xv);
  const auto* y = static_cast<const BlockQ8_K*>(yv);
  float s = 0;
  for (int64_t i = 0; i < nb; ++i) s += (x[i].d * y[i].d) * static_cast<float>(dot_i8(x[i].qs, y[i].qs, kQKK));
  return s;
}

DotFn dot_scalar_fn(DType t) {
  switch (t) {
    case DType::F32: return dot_f32_scalar;
    case DType::F16: return dot_f16_scalar;
    case DType::BF16: return dot_bf16_scalar;
    case DType::Q4_0: return dot_q4_0_scalar;
    case DType::Q4_1: return dot_q4_1_scalar;
    case DType::Q5_0: return dot_q5_0_scalar;
    case DType::Q5_1: return dot_q5_1_scalar;
    case DType::Q8_0: return dot_q8_0_scalar;
    case DType::Q8_1: return dot_q8_1_scalar;
    case DType::Q2_K: return dot_q2_k_scalar;
    case DType::Q3_K: return dot_q3_k_scalar;
    case DType::Q4_K: return dot_q4_k_scalar;
    case DType::Q5_K: return dot_q5_k_scalar;
    case DType::Q6_K: return dot_q6_k_scalar;
    case DType::Q8_K: return dot_q8_k_scalar;
    default: return nullptr;
  }
}

}  // namespace minfer::quants
