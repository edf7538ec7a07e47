// Builders of the tensor-parallel collectives.
#include "ops/parallel.h"

#include "ops/check.h"

namespace minfer::ops {

Tensor* all_reduce(Context& ctx, Tensor* x) {
  detail::require_type(Op::ALL_REDUCE, x, "x", {DType::F32});
  return ctx.new_node(Op::ALL_REDUCE, DType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, {x});
}

Tensor* all_gather(Context& ctx, Tensor* x, int n_ranks) {
  detail::require_type(Op::ALL_GATHER, x, "x", {DType::F32});
  if (n_ranks < 1) detail::fail(Op::ALL_GATHER, fmt::format("n_ranks must be >= 1, got {}", n_ranks));
  Tensor* t = ctx.new_node(Op::ALL_GATHER, DType::F32, {n_ranks * x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, {x});
  t->set_param(0, static_cast<int32_t>(n_ranks));
  return t;
}

}  // namespace minfer::ops
