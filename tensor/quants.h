// Row-level conversions between f32 and every storage dtype, and the CPU dot products that
// matmul uses. Block layouts are the GGUF/ggml block definitions (ggml-common.h); each block
// struct is declared in tensor/quants_blocks.h with its byte layout, and docs/quants.md gives
// the decode formulas, the encoders' error bounds and the dot-product strategy.
//
// A "row" is `n` consecutive elements; `n` must be a multiple of the dtype's block size, else
// std::invalid_argument is thrown (a partial block cannot be stored). Every function here also
// throws std::invalid_argument for a negative `n`, a null pointer with n > 0, an unsupported
// dtype, or a block pointer that is not aligned to its block struct (2 bytes for f16-scaled
// blocks, 4 for F32/I32/Q8_K).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace minfer {

/// Decodes `n` elements of dtype `type` at `src` into f32 `dst` exactly as the GGUF block
/// definitions say. Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K,
/// Q4_K, Q5_K, Q6_K, Q8_K. I32 is converted value-wise. Throws std::invalid_argument otherwise.
/// Bit-exact with ggml's dequantize_row_* (same f32 operations in the same order).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

/// Encodes `n` f32 values into dtype `type` at `dst`. For block types a per-block scale search
/// picks scales at least as good (in squared error) as round-to-nearest with the best single
/// scale; F16/BF16 round to nearest even. Output is deterministic.
/// Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q8_1: exhaustive scoring of f16-rounded candidate scales (ggml's
/// reference encodings, absmax round-to-nearest, a sweep, least-squares refits), so never worse
/// per block than llama-quantize; K-quants: llama-quantize's searches without an importance
/// matrix (byte-identical output to llama-quantize); Q8_K: as
/// quantize_row_activations. Every element decodes to the nearest level of its block's grid.
/// Throws std::invalid_argument for block types when the input holds inf/NaN or a block's
/// magnitude needs a scale beyond the f16 range (|x| above ~65504 * levels).
void quantize_row(DType type, const float* src, void* dst, int64_t n);

/// Fast quantization of activations into the dtype that `vec_dot` pairs with a weight type
/// (Q8_0 / Q8_1 for 32-element blocks, Q8_K for K-quants, F32 for float weights). Same encoding
/// as quantize_row for that dtype, but round-to-nearest with the block's absmax scale (no scale
/// search), as ggml's quantize_row_q8_* do. For F32 it is a copy.
/// A block containing inf/NaN is encoded with a NaN scale (dots touching it return NaN).
void quantize_row_activations(DType act_type, const float* src, void* dst, int64_t n);

/// The activation dtype that `vec_dot(weight_type, ...)` expects for its second operand:
/// Q4_0/Q5_0/Q8_0 -> Q8_0; Q4_1/Q5_1/Q8_1 -> Q8_1; Q2_K..Q6_K and Q8_K -> Q8_K;
/// F32/F16/BF16 -> F32 (float weights are widened exactly and multiplied in f32, so f16 models
/// keep f32 activations). Throws std::invalid_argument for other dtypes.
DType vec_dot_type(DType weight_type);

/// Dot product of `n` elements: `x` is one weight row of dtype `weight_type`, `y` one activation
/// row already encoded as vec_dot_type(weight_type). Accumulates in f32 (integer dot products
/// per block, then scaled), so the result equals the f32 dot of the dequantized operands up to
/// f32 rounding. Uses AVX2 when the build enables it. Q8_K activations must carry consistent
/// bsums (as quantize_row_activations writes them); the s field of Q8_1 is not read.
float vec_dot(DType weight_type, int64_t n, const void* x, const void* y);

/// Unchecked row kernels for inner loops: validate once (e.g. with vec_dot_type and
/// dtype_row_size), then call these per row. `n` must be a multiple of the block size and the
/// pointers valid and aligned; nothing is checked.
using VecDotFn = float (*)(int64_t n, const void* x, const void* y);
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);

/// The unchecked vec_dot kernel of `weight_type` (AVX2 when available). Throws
/// std::invalid_argument for an unsupported dtype.
VecDotFn vec_dot_function(DType weight_type);
/// The unchecked dequantize_row kernel of `type`. Throws std::invalid_argument if unsupported.
DequantizeRowFn dequantize_row_function(DType type);
/// The unchecked quantize_row_activations kernel of `act_type` (F32, Q8_0, Q8_1, Q8_K).
QuantizeRowFn quantize_row_activations_function(DType act_type);

/// Converts `n` elements from `src_type` to `dst_type` (the copy/convert op). Same type: byte
/// copy. F32/F16/BF16/I32 sources widen exactly to f32; F16/BF16 destinations round to nearest
/// even. Block destinations Q8_0/Q8_1/Q8_K use the fast activation encoder (ggml's
/// from_float); the other block destinations use quantize_row. Other pairs go through f32 in
/// chunks. Throws std::invalid_argument as the functions above (I32 is accepted as a source
/// only), and for overlapping src/dst of different types.
void convert_row(DType src_type, const void* src, DType dst_type, void* dst, int64_t n);

/// Bulk IEEE binary16 conversions (F16C when available; identical results to f32_to_f16 /
/// f16_to_f32 of tensor/fp16.h except for NaN payload bits). No checks beyond n >= 0.
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
/// Bulk bfloat16 conversions, identical to f32_to_bf16 / bf16_to_f32.
void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_row(const uint16_t* src, float* dst, int64_t n);

}  // namespace minfer
