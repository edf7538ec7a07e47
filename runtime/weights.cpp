#include "runtime/weights.h"

#include <fmt/format.h>

#include <cstring>

#include "gguf/gguf.h"

namespace minfer {

Weights::Weights(std::shared_ptr<const gguf::File> file, Backend& backend) : file_(std::move(file)), backend_(backend) {
  // One buffer over the whole mapping when the backend computes on host memory: tensors point
  // into it. Otherwise every tensor is copied into backend memory as it is loaded.
  auto bytes = file_->bytes();
  mapping_ = backend_.wrap_host_memory(const_cast<uint8_t*>(bytes.data()), bytes.size());
}

Weights::~Weights() = default;

Tensor* Weights::load(std::string_view name, bool required) {
  if (auto it = by_name_.find(std::string(name)); it != by_name_.end()) return it->second;
  const gguf::TensorInfo* info = file_->find_tensor(name);
  if (!info) {
    if (!required) return nullptr;
    throw std::runtime_error(fmt::format("{}: the model needs tensor '{}', which the file does not have", file_->name(), name));
  }
  Tensor* t = ctx_.new_tensor(info->type, {info->ne[0], info->ne[1], info->ne[2], info->ne[3]}, info->name);
  t->flags |= kTensorWeight;
  if (mapping_) {
    bind_tensor(*t, *mapping_, static_cast<size_t>(info->data - file_->bytes().data()));
  } else {
    buffers_.push_back(backend_.alloc_buffer(info->nbytes));
    bind_tensor(*t, *buffers_.back(), 0);
    backend_.set_tensor(*t, info->data, 0, info->nbytes);
    device_bytes_ += info->nbytes;
  }
  by_name_.emplace(info->name, t);
  return t;
}

Tensor* Weights::get(std::string_view name) { return load(name, true); }
Tensor* Weights::find(std::string_view name) { return load(name, false); }

std::vector<Tensor*> Weights::get_concat_rows(std::initializer_list<std::string_view> names) {
  std::vector<const gguf::TensorInfo*> infos;
  bool same = true;
  for (std::string_view n : names) {
    const gguf::TensorInfo* info = file_->find_tensor(n);
    if (!info) throw std::runtime_error(fmt::format("{}: the model needs tensor '{}', which the file does not have", file_->name(), n));
    if (!infos.empty() && (info->type != infos[0]->type || info->ne[0] != infos[0]->ne[0])) same = false;
    if (info->ne[2] != 1 || info->ne[3] != 1) same = false;
    infos.push_back(info);
  }
  std::vector<Tensor*> out;
  if (!same) {
    for (std::string_view n : names) out.push_back(get(n));
    return out;
  }
  int64_t rows = 0;
  size_t bytes = 0;
  for (auto* i : infos) {
    rows += i->ne[1];
    bytes += i->nbytes;
  }
  std::string root_name;
  for (auto* i : infos) root_name += (root_name.empty() ? "" : "|") + i->name;
  Tensor* root = ctx_.new_tensor(infos[0]->type, {infos[0]->ne[0], rows}, root_name);
  root->flags |= kTensorWeight;
  buffers_.push_back(backend_.alloc_buffer(bytes));
  bind_tensor(*root, *buffers_.back(), 0);
  size_t off = 0;
  int64_t row0 = 0;
  for (auto* i : infos) {
    backend_.set_tensor(*root, i->data, off, i->nbytes);
    Tensor* v = slice(ctx_, root, 1, row0, i->ne[1]);
    v->name = i->name;
    v->flags |= kTensorWeight;
    by_name_.emplace(i->name, v);
    out.push_back(v);
    off += i->nbytes;
    row0 += i->ne[1];
  }
  if (!backend_.is_host()) device_bytes_ += bytes;
  return out;
}

}  // namespace minfer
