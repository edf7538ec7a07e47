#include "tensor/context.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace minfer {
namespace {

std::array<int64_t, kMaxDims> to_ne(std::initializer_list<int64_t> ne, std::string_view what) {
  if (ne.size() == 0 || ne.size() > kMaxDims)
    throw std::invalid_argument(fmt::format("{}: {} dims given, 1 to {} supported", what, ne.size(), kMaxDims));
  std::array<int64_t, kMaxDims> r{1, 1, 1, 1};
  std::copy(ne.begin(), ne.end(), r.begin());
  return r;
}

}  // namespace

Tensor* Context::new_tensor(DType type, std::initializer_list<int64_t> ne, std::string_view name) {
  return new_tensor(type, to_ne(ne, "new_tensor"), name);
}

Tensor* Context::new_tensor(DType type, const std::array<int64_t, kMaxDims>& ne, std::string_view name) {
  Tensor& t = tensors_.emplace_back();
  t.type = type;
  t.ne = ne;
  t.nb = contiguous_strides(type, ne);
  t.name = std::string(name);
  return &t;
}

Tensor* Context::new_node(Op op, DType type, const std::array<int64_t, kMaxDims>& ne,
                          std::initializer_list<Tensor*> srcs) {
  if (srcs.size() > kMaxSrc) throw std::invalid_argument("new_node: too many sources");
  Tensor* t = new_tensor(type, ne);
  t->op = op;
  std::copy(srcs.begin(), srcs.end(), t->src.begin());
  return t;
}

Tensor* Context::new_view(Op op, Tensor* src, DType type, const std::array<int64_t, kMaxDims>& ne,
                          const std::array<size_t, kMaxDims>& nb, size_t offset) {
  if (!src) throw OpError(fmt::format("{}: null source", op_name(op)));
  Tensor probe;
  probe.type = type;
  probe.ne = ne;
  probe.nb = nb;
  for (int i = 0; i < kMaxDims; ++i)
    if (ne[i] < 0) throw OpError(fmt::format("{}: negative dimension in view of {}", op_name(op), describe(*src)));
  if (ne[0] % dtype_block_size(type) != 0)
    throw OpError(fmt::format("{}: ne0 = {} is not a multiple of the {} block size", op_name(op), ne[0],
                              dtype_name(type)));
  const size_t span = probe.nbytes();
  const size_t src_bytes = src->nbytes();
  if (offset > src_bytes || span > src_bytes - offset)
    throw OpError(fmt::format("{}: view of {} bytes at offset {} lies outside {} ({} bytes)", op_name(op),
                              span, offset, describe(*src), src_bytes));
  Tensor& t = tensors_.emplace_back();
  t.op = op;
  t.type = type;
  t.ne = ne;
  t.nb = nb;
  t.src[0] = src;
  t.view_src = src->storage_root();
  t.view_offs = src->view_offs + offset;
  t.name = src->name.empty() ? std::string() : src->name + " (view)";
  if (src->data) t.data = static_cast<char*>(src->data) + offset;
  t.buffer = src->buffer;
  return &t;
}

Tensor* reshape(Context& ctx, Tensor* a, std::initializer_list<int64_t> ne_list) {
  auto ne = to_ne(ne_list, "RESHAPE");
  if (!a->is_contiguous())
    throw OpError(fmt::format("RESHAPE: source {} is not contiguous", describe(*a)));
  if (ne[0] * ne[1] * ne[2] * ne[3] != a->nelements())
    throw OpError(fmt::format("RESHAPE: {} has {} elements, new shape [{}, {}, {}, {}] has {}", describe(*a),
                              a->nelements(), ne[0], ne[1], ne[2], ne[3], ne[0] * ne[1] * ne[2] * ne[3]));
  return ctx.new_view(Op::RESHAPE, a, a->type, ne, contiguous_strides(a->type, ne), 0);
}

Tensor* view(Context& ctx, Tensor* a, std::initializer_list<int64_t> ne_list,
             std::initializer_list<size_t> nb_rest, size_t offset) {
  auto ne = to_ne(ne_list, "VIEW");
  if (nb_rest.size() + 1 < ne_list.size())
    throw OpError(fmt::format("VIEW: {} dims need {} strides, {} given", ne_list.size(), ne_list.size() - 1,
                              nb_rest.size()));
  std::array<size_t, kMaxDims> nb{};
  nb[0] = dtype_type_size(a->type);
  size_t i = 1;
  for (size_t s : nb_rest) {
    if (i >= kMaxDims) throw OpError("VIEW: too many strides");
    nb[i++] = s;
  }
  for (; i < kMaxDims; ++i) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
  return ctx.new_view(Op::VIEW, a, a->type, ne, nb, offset);
}

Tensor* permute(Context& ctx, Tensor* a, int ax0, int ax1, int ax2, int ax3) {
  const int ax[kMaxDims] = {ax0, ax1, ax2, ax3};
  bool seen[kMaxDims] = {};
  for (int v : ax) {
    if (v < 0 || v >= kMaxDims || seen[v])
      throw OpError(fmt::format("PERMUTE: axes ({}, {}, {}, {}) are not a permutation of 0..3", ax0, ax1, ax2, ax3));
    seen[v] = true;
  }
  if (dtype_is_quantized(a->type) && ax0 != 0)
    throw OpError(fmt::format("PERMUTE: cannot move dim 0 of block-quantized {}", describe(*a)));
  std::array<int64_t, kMaxDims> ne{};
  std::array<size_t, kMaxDims> nb{};
  for (int i = 0; i < kMaxDims; ++i) {
    ne[ax[i]] = a->ne[i];
    nb[ax[i]] = a->nb[i];
  }
  Tensor* t = ctx.new_view(Op::PERMUTE, a, a->type, ne, nb, 0);
  for (int i = 0; i < kMaxDims; ++i) t->set_param(i, ax[i]);
  return t;
}

Tensor* transpose(Context& ctx, Tensor* a) {
  Tensor* t = permute(ctx, a, 1, 0, 2, 3);
  t->op = Op::TRANSPOSE;
  return t;
}

Tensor* slice(Context& ctx, Tensor* a, int dim, int64_t start, int64_t len) {
  if (dim < 0 || dim >= kMaxDims) throw OpError(fmt::format("slice: dim {} out of range", dim));
  if (start < 0 || len < 0 || start > a->ne[dim] || len > a->ne[dim] - start)
    throw OpError(fmt::format("slice: [{}, {}) of dim {} outside {}", start, start + len, dim, describe(*a)));
  const int64_t bs = dtype_block_size(a->type);
  if (dim == 0 && (start % bs != 0 || len % bs != 0))
    throw OpError(fmt::format("slice: dim-0 range [{}, {}) of {} is not block aligned", start, start + len,
                              describe(*a)));
  auto ne = a->ne;
  ne[dim] = len;
  const size_t offset = static_cast<size_t>(dim == 0 ? start / bs : start) * a->nb[dim];
  return ctx.new_view(Op::VIEW, a, a->type, ne, a->nb, offset);
}

Tensor* adjacent_rows(Context& ctx, Tensor* a, Tensor* b) {
  if (!a || !b || !a->view_src || a->view_src != b->view_src) return nullptr;
  if (a->type != b->type || a->ne[0] != b->ne[0] || !a->is_contiguous() || !b->is_contiguous()) return nullptr;
  if (a->ne[2] != 1 || a->ne[3] != 1 || b->ne[2] != 1 || b->ne[3] != 1) return nullptr;
  Tensor* root = a->view_src;
  if (!root->is_contiguous() || root->ne[0] != a->ne[0]) return nullptr;
  if (b->view_offs != a->view_offs + a->nbytes()) return nullptr;
  return ctx.new_view(Op::VIEW, root, a->type, {a->ne[0], a->ne[1] + b->ne[1], 1, 1}, a->nb, a->view_offs);
}

}  // namespace minfer
