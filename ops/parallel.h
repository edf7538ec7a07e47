// Tensor-parallel ops (tensor/collective.h): the all-reduce that ends a row-parallel matmul and
// the all-gather that joins the vocab-parallel LM head's logits.
#pragma once

#include "tensor/context.h"

namespace minfer::ops {

/// The element-wise sum of `x` over the ranks of the computing backend's tensor-parallel group
/// (Backend::join), the same bits on every rank (CPU ranks add in rank order; CUDA ranks in
/// NCCL's order, which is rank order for two ranks); on a backend in no group (or a group of one)
/// a copy. x: f32 [any shape] -> contiguous f32 of x's shape. Every
/// rank's graph must record its all-reduces in the same order with the same shapes.
Tensor* all_reduce(Context& ctx, Tensor* x);

/// The ranks' `x` concatenated along dim 0 in rank order (Megatron's
/// gather_from_tensor_model_parallel_region, which gathers the last PyTorch dim, ggml's dim 0):
/// x f32 [n0, n1, n2, n3] on each of `n_ranks` ranks -> contiguous f32 [n_ranks * n0, n1, n2, n3]
/// whose row (i1, i2, i3) is rank 0's row, then rank 1's, ... Dim 0 because the vocab-parallel
/// LM head's logits [n_vocab / N, n_out] are split along it: the result is the whole
/// [n_vocab, n_out]. n_ranks is the group's size (the output shape depends on it); computing on a
/// backend whose group has another size, or none while n_ranks > 1, throws OpError. Throws
/// OpError for n_ranks < 1 or a non-f32 x. Ordered with the all-reduces as all_reduce says.
Tensor* all_gather(Context& ctx, Tensor* x, int n_ranks);

}  // namespace minfer::ops
