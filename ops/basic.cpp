#include "ops/basic.h"

#include "ops/check.h"

namespace minfer::ops {
using detail::fail;
using detail::require_type;

Tensor* get_rows(Context& ctx, Tensor* table, Tensor* ids) {
  detail::require_src(Op::GET_ROWS, table, "table");
  require_type(Op::GET_ROWS, ids, "ids", {DType::I32});
  if (ids->ne[2] != 1 || ids->ne[3] != 1) fail(Op::GET_ROWS, "ids " + describe(*ids) + " must be 1-D or 2-D");
  if (table->ne[3] != 1 || (table->ne[2] != 1 && table->ne[2] != ids->ne[1]))
    fail(Op::GET_ROWS, fmt::format("table {} must be 2-D, or 3-D with one table per column of ids {}",
                                   describe(*table), describe(*ids)));
  const DType out = table->type == DType::I32 ? DType::I32 : DType::F32;
  return ctx.new_node(Op::GET_ROWS, out, {table->ne[0], ids->ne[0], ids->ne[1], 1}, {table, ids});
}

static Tensor* binary(Context& ctx, Op op, Tensor* a, Tensor* b) {
  require_type(op, a, "a", {DType::F32, DType::F16});
  require_type(op, b, "b", {DType::F32, DType::F16});
  if (!can_repeat(*b, *a))
    fail(op, fmt::format("b {} cannot be broadcast onto a {}", describe(*b), describe(*a)));
  return ctx.new_node(op, DType::F32, a->ne, {a, b});
}

Tensor* add(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::ADD, a, b); }
Tensor* mul(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::MUL, a, b); }

Tensor* scale(Context& ctx, Tensor* a, float s) {
  require_type(Op::SCALE, a, "a", {DType::F32, DType::F16});
  Tensor* t = ctx.new_node(Op::SCALE, DType::F32, a->ne, {a});
  t->set_param(0, s);
  return t;
}

Tensor* silu(Context& ctx, Tensor* a) {
  require_type(Op::SILU, a, "a", {DType::F32, DType::F16});
  return ctx.new_node(Op::SILU, DType::F32, a->ne, {a});
}

Tensor* swiglu(Context& ctx, Tensor* gate, Tensor* up) {
  require_type(Op::SWIGLU, gate, "gate", {DType::F32, DType::F16});
  require_type(Op::SWIGLU, up, "up", {DType::F32, DType::F16});
  if (!same_shape(*gate, *up))
    fail(Op::SWIGLU, fmt::format("gate {} and up {} differ in shape", describe(*gate), describe(*up)));
  return ctx.new_node(Op::SWIGLU, DType::F32, gate->ne, {gate, up});
}

Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim) {
  require_type(Op::CONCAT, a, "a", {DType::F32, DType::F16});
  require_type(Op::CONCAT, b, "b", {DType::F32, DType::F16});
  if (dim < 0 || dim >= kMaxDims) fail(Op::CONCAT, fmt::format("dim {} out of range", dim));
  auto ne = a->ne;
  for (int i = 0; i < kMaxDims; ++i)
    if (i != dim && a->ne[i] != b->ne[i])
      fail(Op::CONCAT, fmt::format("a {} and b {} differ outside dim {}", describe(*a), describe(*b), dim));
  ne[dim] += b->ne[dim];
  Tensor* t = ctx.new_node(Op::CONCAT, DType::F32, ne, {a, b});
  t->set_param(0, dim);
  return t;
}

Tensor* cast(Context& ctx, Tensor* a, DType type) {
  detail::require_src(Op::CPY, a, "a");
  if (a->ne[0] % dtype_block_size(type) != 0)
    fail(Op::CPY, fmt::format("{} has ne0 not a multiple of the {} block size", describe(*a), dtype_name(type)));
  return ctx.new_node(Op::CPY, type, a->ne, {a});
}

Tensor* cpy(Context& ctx, Tensor* a, Tensor* dst) {
  detail::require_src(Op::CPY, a, "a");
  detail::require_src(Op::CPY, dst, "dst");
  if (a->nelements() != dst->nelements())
    fail(Op::CPY, fmt::format("a {} and dst {} differ in element count", describe(*a), describe(*dst)));
  if (!dst->rows_contiguous()) fail(Op::CPY, "dst " + describe(*dst) + " rows are not contiguous");
  if (dtype_is_quantized(dst->type) && a->ne[0] != dst->ne[0])
    fail(Op::CPY, "a quantized dst needs the same row length as the source");
  Tensor* t = ctx.new_view(Op::VIEW, dst, dst->type, dst->ne, dst->nb, 0);
  t->op = Op::CPY;
  t->src = {};
  t->src[0] = a;
  t->src[1] = dst;
  return t;
}

Tensor* argmax(Context& ctx, Tensor* a) {
  require_type(Op::ARGMAX, a, "a", {DType::F32});
  return ctx.new_node(Op::ARGMAX, DType::I32, {a->ne[1], a->ne[2], a->ne[3], 1}, {a});
}

}  // namespace minfer::ops
