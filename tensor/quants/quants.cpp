// Public entry points of tensor/quants.h: argument checks and per-dtype dispatch to the family
// kernels (legacy.cpp, kquants.cpp, float.cpp, activations.cpp, dot_*.cpp).
#include "tensor/quants.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "tensor/quants/internal.h"

namespace minfer {

namespace {

using namespace quants;

struct Kernels {
  DequantizeFn dequantize = nullptr;
  QuantizeFn quantize = nullptr;     // quantize_row
  QuantizeFn activations = nullptr;  // quantize_row_activations (only for activation dtypes)
  DotFn dot = nullptr;               // best available (AVX2 when compiled)
  DType act = DType::F32;
  size_t align = 1;
};

Kernels make(DequantizeFn deq, QuantizeFn q, QuantizeFn act_fn, DType weight, DType act, size_t align) {
  const DotFn simd = dot_avx2_fn(weight);
  return Kernels{deq, q, act_fn, simd ? simd : dot_scalar_fn(weight), act, align};
}

Kernels kernels_of(DType t) {
  switch (t) {
    case DType::F32: return make(dequantize_f32, quantize_f32, quantize_f32, t, DType::F32, 4);
    case DType::F16: return make(dequantize_f16, quantize_f16, nullptr, t, DType::F32, 2);
    case DType::BF16: return make(dequantize_bf16, quantize_bf16, nullptr, t, DType::F32, 2);
    case DType::Q4_0: return make(dequantize_q4_0, quantize_q4_0, nullptr, t, DType::Q8_0, 2);
    case DType::Q4_1: return make(dequantize_q4_1, quantize_q4_1, nullptr, t, DType::Q8_1, 2);
    case DType::Q5_0: return make(dequantize_q5_0, quantize_q5_0, nullptr, t, DType::Q8_0, 2);
    case DType::Q5_1: return make(dequantize_q5_1, quantize_q5_1, nullptr, t, DType::Q8_1, 2);
    case DType::Q8_0: return make(dequantize_q8_0, quantize_q8_0, quantize_act_q8_0, t, DType::Q8_0, 2);
    case DType::Q8_1: return make(dequantize_q8_1, quantize_q8_1, quantize_act_q8_1, t, DType::Q8_1, 2);
    case DType::Q2_K: return make(dequantize_q2_k, quantize_q2_k, nullptr, t, DType::Q8_K, 2);
    case DType::Q3_K: return make(dequantize_q3_k, quantize_q3_k, nullptr, t, DType::Q8_K, 2);
    case DType::Q4_K: return make(dequantize_q4_k, quantize_q4_k, nullptr, t, DType::Q8_K, 2);
    case DType::Q5_K: return make(dequantize_q5_k, quantize_q5_k, nullptr, t, DType::Q8_K, 2);
    case DType::Q6_K: return make(dequantize_q6_k, quantize_q6_k, nullptr, t, DType::Q8_K, 2);
    case DType::Q8_K: return make(dequantize_q8_k, quantize_q8_k, quantize_act_q8_k, t, DType::Q8_K, 4);
    case DType::I32: return Kernels{dequantize_i32, nullptr, nullptr, nullptr, DType::F32, 4};
    default: return Kernels{};
  }
}

[[noreturn]] void unsupported(const char* fn, DType t) {
  std::string name;
  try {
    name = std::string(dtype_name(t));
  } catch (const std::invalid_argument&) {
    name = "id " + std::to_string(static_cast<int>(t));
  }
  throw std::invalid_argument(std::string(fn) + ": dtype " + name + " is not supported");
}

// Checks n, the pointer and its alignment; returns the row's byte size.
size_t check_row(const char* fn, DType t, const void* p, int64_t n, size_t align) {
  const DTypeTraits& tr = dtype_traits(t);
  if (n < 0) throw std::invalid_argument(std::string(fn) + ": negative element count " + std::to_string(n));
  if (n % tr.block_size != 0)
    throw std::invalid_argument(std::string(fn) + ": element count " + std::to_string(n) +
                                " is not a multiple of the " + std::string(tr.name) + " block size " +
                                std::to_string(tr.block_size));
  if (n > 0 && p == nullptr) throw std::invalid_argument(std::string(fn) + ": null " + std::string(tr.name) + " row");
  if (reinterpret_cast<uintptr_t>(p) % align != 0)
    throw std::invalid_argument(std::string(fn) + ": " + std::string(tr.name) + " row pointer is not " +
                                std::to_string(align) + "-byte aligned");
  return dtype_row_size(t, n);
}

// Block encoders need finite input whose block scales fit in f16. No block format can scale
// values beyond 65504^2 (the real limits are lower and checked per block by the encoders);
// refusing them here also keeps the searches' weighted sums (up to |x|^3) finite in f32.
void check_encodable(const char* fn, DType t, const float* src, int64_t n) {
  constexpr float kLimit = 65504.f * 65504.f;
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::fabs(src[i]) <= std::numeric_limits<float>::max()))
      throw std::invalid_argument(std::string(fn) + "(" + std::string(dtype_name(t)) + "): non-finite input " +
                                  std::to_string(src[i]) + " at element " + std::to_string(i));
    if (std::fabs(src[i]) > kLimit)
      throw std::invalid_argument(std::string(fn) + "(" + std::string(dtype_name(t)) + "): input " +
                                  std::to_string(src[i]) + " at element " + std::to_string(i) +
                                  " needs a block scale beyond the f16 range");
  }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  const Kernels k = kernels_of(type);
  if (!k.dequantize) unsupported("dequantize_row", type);
  check_row("dequantize_row", type, src, n, k.align);
  check_row("dequantize_row", DType::F32, dst, n, 4);
  k.dequantize(src, dst, n);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  const Kernels k = kernels_of(type);
  if (!k.quantize) unsupported("quantize_row", type);
  check_row("quantize_row", type, dst, n, k.align);
  check_row("quantize_row", DType::F32, src, n, 4);
  if (dtype_is_quantized(type)) check_encodable("quantize_row", type, src, n);
  k.quantize(src, dst, n);
}

void quantize_row_activations(DType act_type, const float* src, void* dst, int64_t n) {
  const Kernels k = kernels_of(act_type);
  if (!k.activations) unsupported("quantize_row_activations", act_type);
  check_row("quantize_row_activations", act_type, dst, n, k.align);
  check_row("quantize_row_activations", DType::F32, src, n, 4);
  k.activations(src, dst, n);
}

DType vec_dot_type(DType weight_type) {
  const Kernels k = kernels_of(weight_type);
  if (!k.dot) unsupported("vec_dot_type", weight_type);
  return k.act;
}

float vec_dot(DType weight_type, int64_t n, const void* x, const void* y) {
  const Kernels k = kernels_of(weight_type);
  if (!k.dot) unsupported("vec_dot", weight_type);
  check_row("vec_dot", weight_type, x, n, k.align);
  check_row("vec_dot", k.act, y, n, kernels_of(k.act).align);
  return k.dot(n, x, y);
}

VecDotFn vec_dot_function(DType weight_type) {
  const Kernels k = kernels_of(weight_type);
  if (!k.dot) unsupported("vec_dot_function", weight_type);
  return k.dot;
}

DequantizeRowFn dequantize_row_function(DType type) {
  const Kernels k = kernels_of(type);
  if (!k.dequantize) unsupported("dequantize_row_function", type);
  return k.dequantize;
}

QuantizeRowFn quantize_row_activations_function(DType act_type) {
  const Kernels k = kernels_of(act_type);
  if (!k.activations) unsupported("quantize_row_activations_function", act_type);
  return k.activations;
}

void convert_row(DType src_type, const void* src, DType dst_type, void* dst, int64_t n) {
  const Kernels ks = kernels_of(src_type), kd = kernels_of(dst_type);
  if (!ks.dequantize) unsupported("convert_row", src_type);
  if (!kd.quantize) unsupported("convert_row", dst_type);
  const size_t src_bytes = check_row("convert_row", src_type, src, n, ks.align);
  const size_t dst_bytes = check_row("convert_row", dst_type, dst, n, kd.align);
  if (n == 0) return;
  if (src_type == dst_type) {
    std::memmove(dst, src, src_bytes);
    return;
  }
  const auto* s8 = static_cast<const char*>(src);
  auto* d8 = static_cast<char*>(dst);
  if (s8 < d8 + dst_bytes && d8 < s8 + src_bytes)
    throw std::invalid_argument("convert_row: source and destination overlap");
  // Encoder for f32 input: the activation encoder where the dtype has one (Q8_*), else
  // quantize_row's (checked for non-finite input when it is a block type).
  const QuantizeRowFn encode = kd.activations ? kd.activations : kd.quantize;
  const bool needs_finite = dtype_is_quantized(dst_type) && !kd.activations;
  if (src_type == DType::F32) {
    const auto* f = static_cast<const float*>(src);
    if (needs_finite) check_encodable("convert_row", dst_type, f, n);
    encode(f, dst, n);
    return;
  }
  if (dst_type == DType::F32) {
    ks.dequantize(src, static_cast<float*>(dst), n);
    return;
  }
  constexpr int64_t kChunk = 4096;  // a multiple of every block size
  alignas(64) float tmp[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    ks.dequantize(s8 + dtype_row_size(src_type, i), tmp, m);
    if (needs_finite) check_encodable("convert_row", dst_type, tmp, m);
    encode(tmp, d8 + dtype_row_size(dst_type, i), m);
  }
}

void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
  if (n < 0) throw std::invalid_argument("f32_to_f16_row: negative element count");
  quants::quantize_f16(src, dst, n);
}

void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  if (n < 0) throw std::invalid_argument("f16_to_f32_row: negative element count");
  quants::dequantize_f16(src, dst, n);
}

void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  if (n < 0) throw std::invalid_argument("f32_to_bf16_row: negative element count");
  quants::quantize_bf16(src, dst, n);
}

void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  if (n < 0) throw std::invalid_argument("bf16_to_f32_row: negative element count");
  quants::dequantize_bf16(src, dst, n);
}

namespace quants {

float vec_dot_scalar(DType weight_type, int64_t n, const void* x, const void* y) {
  const Kernels k = kernels_of(weight_type);
  const DotFn dot = dot_scalar_fn(weight_type);
  if (!dot) unsupported("vec_dot_scalar", weight_type);
  check_row("vec_dot_scalar", weight_type, x, n, k.align);
  check_row("vec_dot_scalar", k.act, y, n, kernels_of(k.act).align);
  return dot(n, x, y);
}

}  // namespace quants

}  // namespace minfer
