// Builders for the mixture-of-experts ops: top_k, mul_mat_id.
#include "ops/moe.h"

#include "ops/check.h"

namespace minfer::ops {
using detail::fail;
using detail::require_type;

Tensor* top_k(Context& ctx, Tensor* x, int32_t k) {
  require_type(Op::TOP_K, x, "x", {DType::F32});
  if (k < 1 || k > x->ne[0])
    fail(Op::TOP_K, fmt::format("k {} must be in [1, {}] for x {}", k, x->ne[0], describe(*x)));
  Tensor* t = ctx.new_node(Op::TOP_K, DType::I32, {k, x->ne[1], x->ne[2], x->ne[3]}, {x});
  t->set_param(0, k);
  return t;
}

Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* ids, Tensor* b) {
  detail::require_src(Op::MUL_MAT_ID, as, "as");
  require_type(Op::MUL_MAT_ID, ids, "ids", {DType::I32});
  require_type(Op::MUL_MAT_ID, b, "b", {DType::F32, DType::F16});
  if (as->type == DType::I32 || !dtype_traits(as->type).supported || as->type == DType::Q8_K)
    fail(Op::MUL_MAT_ID, fmt::format("weight dtype {} of {} is not supported", dtype_name(as->type), describe(*as)));
  if (as->ne[3] != 1) fail(Op::MUL_MAT_ID, "as " + describe(*as) + " must be 3-D [K, M, n_expert]");
  if (!as->rows_contiguous()) fail(Op::MUL_MAT_ID, "weight rows of " + describe(*as) + " must be contiguous");
  if (ids->ne[2] != 1 || ids->ne[3] != 1) fail(Op::MUL_MAT_ID, "ids " + describe(*ids) + " must be 2-D [k, n_tokens]");
  const int64_t k = ids->ne[0], n_tokens = ids->ne[1];
  if (b->ne[0] != as->ne[0])
    fail(Op::MUL_MAT_ID, fmt::format("inner dims differ: as {} and b {}", describe(*as), describe(*b)));
  if (b->ne[2] != n_tokens || b->ne[3] != 1)
    fail(Op::MUL_MAT_ID, fmt::format("b {} must be [K, n_act, n_tokens] with the n_tokens = {} of ids {}",
                                     describe(*b), n_tokens, describe(*ids)));
  if (b->ne[1] != 1 && b->ne[1] != k)
    fail(Op::MUL_MAT_ID, fmt::format("b {} must hold 1 or k = {} activation rows per token (ids {})", describe(*b), k,
                                     describe(*ids)));
  return ctx.new_node(Op::MUL_MAT_ID, DType::F32, {as->ne[1], k, n_tokens, 1}, {as, ids, b});
}

}  // namespace minfer::ops
