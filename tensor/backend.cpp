#include "tensor/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <new>

#include "tensor/context.h"

namespace minfer {
namespace {

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

std::shared_ptr<void> Backend::alloc_host(size_t bytes) {
  void* p = ::operator new(std::max<size_t>(bytes, 1), std::align_val_t{64}, std::nothrow);
  if (!p) throw OutOfMemoryError(fmt::format("{}: cannot allocate {} bytes of host memory", name(), bytes));
  return std::shared_ptr<void>(p, [](void* q) { ::operator delete(q, std::align_val_t{64}); });
}

void Backend::join(std::shared_ptr<Collective> group, int rank) {
  (void)group;
  throw std::invalid_argument(fmt::format("{}: this backend cannot be rank {} of a tensor-parallel group", name(), rank));
}

void bind_tensor(Tensor& t, Buffer& buffer, size_t offset) {
  const size_t n = t.nbytes();
  if (offset > buffer.size() || n > buffer.size() - offset)
    throw std::out_of_range(fmt::format("bind_tensor: {} ({} bytes at {}) does not fit a buffer of {} bytes",
                                        describe(t), n, offset, buffer.size()));
  t.data = static_cast<char*>(buffer.base()) + offset;
  t.buffer = &buffer;
}

void resolve_view(Tensor& t) {
  if (!t.view_src) return;
  if (!t.view_src->data)
    throw std::logic_error(fmt::format("view {} of a tensor without storage", describe(t)));
  t.data = static_cast<char*>(t.view_src->data) + t.view_offs;
  t.buffer = t.view_src->buffer;
}

std::unique_ptr<Buffer> allocate_tensors(Context& ctx, Backend& backend) {
  const size_t align = backend.alignment();
  size_t total = 0;
  for (Tensor& t : ctx)
    if (!t.data && !t.view_src && t.op == Op::NONE) total = align_up(total, align) + t.nbytes();
  if (total == 0) return nullptr;
  auto buf = backend.alloc_buffer(total);
  size_t off = 0;
  for (Tensor& t : ctx) {
    if (t.data || t.view_src || t.op != Op::NONE) continue;
    off = align_up(off, align);
    bind_tensor(t, *buf, off);
    off += t.nbytes();
  }
  // Views of nodes get their data when a graph allocator places the node.
  for (Tensor& t : ctx)
    if (t.view_src && !t.data && t.view_src->op == Op::NONE) resolve_view(t);
  return buf;
}

void upload(Backend& b, Tensor& t, const void* src, size_t bytes) {
  if (bytes != t.nbytes())
    throw std::invalid_argument(fmt::format("upload: {} bytes given for {} ({} bytes)", bytes, describe(t), t.nbytes()));
  b.set_tensor(t, src, 0, bytes);
}

void download(Backend& b, const Tensor& t, void* dst, size_t bytes) {
  if (bytes != t.nbytes())
    throw std::invalid_argument(fmt::format("download: {} bytes asked of {} ({} bytes)", bytes, describe(t), t.nbytes()));
  b.get_tensor(t, dst, 0, bytes);
}

}  // namespace minfer
