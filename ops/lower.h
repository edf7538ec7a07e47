// Lowering of fused ops to their decompositions.
#pragma once

#include "tensor/backend.h"
#include "tensor/context.h"
#include "tensor/graph.h"

namespace minfer::ops {

/// Rewrites the fused node `node` (FFN_SWIGLU or QKV) in place into the last op of its
/// decomposition, recording the earlier ops in `ctx`; consumers keep pointing at `node`.
/// Throws std::invalid_argument for a node that is not fused.
void decompose(Context& ctx, Tensor* node);

/// Decomposes every fused node of `g` that `backend` has no kernel for, then rebuilds g's order.
/// Returns the number of nodes decomposed.
int lower_fused(Context& ctx, Graph& g, const Backend& backend);

}  // namespace minfer::ops
