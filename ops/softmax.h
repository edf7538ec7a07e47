// Softmax over dim 0 with scale and an optional causal mask.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

/// y = softmax(scale * x) over each row (dim 0), max-subtracted, in f32.
/// x: f32 [n_kv, n_rows, ne2, ne3]. pos: optional I32 [n_rows]; when given, column j of row i is
/// masked (weight 0) for j > pos[i] (causal attention with a past of pos[0] tokens).
/// -> f32 with x's shape. A fully masked row is a runtime error (cannot happen with pos >= 0).
Tensor* soft_max(Context& ctx, Tensor* x, float scale, Tensor* pos = nullptr);

}  // namespace minfer::ops
