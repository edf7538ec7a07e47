// Matrix multiplication with the weight-first convention of tensor/tensor.h.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

/// out[n][m] = sum_k a[m][k] * b[n][k].
/// a: [K, M, A2, A3] weights of any storage dtype (F32, F16, BF16, every GGUF block type; rows
///    contiguous); b: [K, N, B2, B3] f32 or f16 activations with B2 % A2 == 0 and B3 % A3 == 0
///    (a is broadcast over the batch dims). -> f32 [M, N, B2, B3].
/// Quantized weights multiply against activations quantized to the weight's vec_dot_type
/// (tensor/quants.h); float weights multiply in f32.
Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b);

}  // namespace minfer::ops
