// Tensor-parallel ops (tensor/collective.h): the all-reduce that ends a row-parallel matmul.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

/// The element-wise sum of `x` over the ranks of the computing backend's tensor-parallel group
/// (Backend::join), in rank order, so that every rank gets the same bits; on a backend in no
/// group (or a group of one) a copy. x: f32 [any shape] -> contiguous f32 of x's shape. Every
/// rank's graph must record its all-reduces in the same order with the same shapes.
Tensor* all_reduce(Context& ctx, Tensor* x);

}  // namespace minfer::ops
