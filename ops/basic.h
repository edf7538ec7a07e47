// Basic ops: lookup, element-wise arithmetic, activations, concat, copy/convert, argmax.
// Builders only record a node; nothing is computed until a backend runs the graph.
// Every builder throws OpError naming the op and the operands' shapes on a mismatch.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

/// Embedding lookup. table [n_embd, n_rows] of any dtype (block dtypes dequantize), ids I32 [n]
/// or [n, b] -> f32 [n_embd, n] (or [n_embd, n, b]); an I32 table gives I32 rows, copied (as
/// ggml_get_rows: an index lookup, e.g. a tensor-parallel rank's global-to-local id map). An id
/// outside [0, n_rows) is a runtime error.
/// A 3-D table [n_embd, n_rows, b] is a batch of tables, as ggml_get_rows: row (i, j) of the
/// output is table[:, ids[i, j], j] (MoE routing gathers each token's selected probabilities so).
Tensor* get_rows(Context& ctx, Tensor* table, Tensor* ids);

/// a + b, with b broadcast (tiled) over a. a, b: f32 or f16 -> f32 with a's shape.
Tensor* add(Context& ctx, Tensor* a, Tensor* b);

/// a * b element-wise, with b broadcast over a. a, b: f32 or f16 -> f32 with a's shape.
Tensor* mul(Context& ctx, Tensor* a, Tensor* b);

/// s * a. a: f32 or f16 -> f32.
Tensor* scale(Context& ctx, Tensor* a, float s);

/// x * sigmoid(x) (SiLU, Hendrycks & Gimpel 2016). f32/f16 -> f32.
Tensor* silu(Context& ctx, Tensor* a);

/// silu(gate) * up (SwiGLU, Shazeer 2020). gate and up: same shape, f32/f16, may be strided views
/// (e.g. the two halves of one fused gate|up matmul) -> contiguous f32.
Tensor* swiglu(Context& ctx, Tensor* gate, Tensor* up);

/// Concatenation along `dim` (0..3). All other dims must match. f32/f16 -> f32.
Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim);

/// Converts `a` into a new contiguous tensor of `type` (any storage dtype; block dtypes need
/// ne0 to be a multiple of the block size and quantize row by row).
Tensor* cast(Context& ctx, Tensor* a, DType type);

/// Copies/converts `a` into `dst` (same element count; dst rows contiguous). Returns a node that
/// aliases dst; use it (not dst) downstream so the copy is ordered before its readers.
Tensor* cpy(Context& ctx, Tensor* a, Tensor* dst);

/// Index of the largest value of each row. a: f32 [n, rows...] -> I32 [rows...]. Ties: the lowest
/// index. NaN rows give the index of the first NaN.
Tensor* argmax(Context& ctx, Tensor* a);

}  // namespace minfer::ops
