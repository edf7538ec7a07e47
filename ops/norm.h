// RMSNorm (Zhang & Sennrich 2019): y = x / sqrt(mean(x^2) + eps) * w, over dim 0 of each row.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

/// x: f32/f16 [n, ...]; weight: optional f32/f16 [n] (applied after normalizing, as in
/// Transformers' Qwen2RMSNorm); eps > 0. -> f32 with x's shape. The mean is accumulated in f32
/// on every backend (double in the test reference).
Tensor* rms_norm(Context& ctx, Tensor* x, float eps, Tensor* weight = nullptr);

}  // namespace minfer::ops
