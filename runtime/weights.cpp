#include "runtime/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "gguf/gguf.h"

namespace minfer {

Weights::Weights(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard)
    : file_(std::move(file)), backend_(backend), shard_(shard) {
  if (shard_.n < 1 || shard_.rank < 0 || shard_.rank >= shard_.n)
    throw std::invalid_argument(fmt::format("weights: shard rank {} of {} is not a rank of the group", shard_.rank, shard_.n));
  // One buffer over the whole mapping when the backend computes on host memory: tensors point
  // into it. Otherwise every tensor is copied into backend memory as it is loaded.
  auto bytes = file_->bytes();
  mapping_ = backend_.wrap_host_memory(const_cast<uint8_t*>(bytes.data()), bytes.size());
}

Weights::~Weights() = default;

namespace {

// Throws when the file's tensor `i` is not of the shape the hyper-parameters give it: a wrong
// shape would otherwise load and broadcast into wrong output, or fail only at the first forward
// with an op-level message.
void check_shape(const gguf::File& f, const gguf::TensorInfo& i, const Weights::Shape& expected) {
  constexpr auto kDims = static_cast<size_t>(gguf::kMaxDims);
  bool ok = expected.size() <= kDims;
  for (size_t d = 0; ok && d < kDims; ++d) ok = i.ne[d] == (d < expected.size() ? expected[d] : 1);
  if (ok) return;
  // Both at the longer of the two lengths, so that a differing trailing 1 shows.
  const size_t n = std::min(std::max(expected.size(), static_cast<size_t>(i.n_dims)), kDims);
  Weights::Shape want = expected;
  if (want.size() < n) want.resize(n, 1);
  throw std::runtime_error(fmt::format("{}: tensor '{}' has shape [{}], but the hyper-parameters give it [{}]", f.name(),
                                       i.name, fmt::join(i.ne, i.ne + n, ", "), fmt::join(want, ", ")));
}

}  // namespace

Tensor* Weights::load(std::string_view name, bool required, const Shape& expected) {
  if (auto it = by_name_.find(std::string(name)); it != by_name_.end()) return it->second;
  const gguf::TensorInfo* info = file_->find_tensor(name);
  if (!info) {
    if (!required) return nullptr;
    throw std::runtime_error(fmt::format("{}: the model needs tensor '{}', which the file does not have", file_->name(), name));
  }
  check_shape(*file_, *info, expected);
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

const gguf::TensorInfo& Weights::info(std::string_view name, const Shape& expected) const {
  const gguf::TensorInfo* i = file_->find_tensor(name);
  if (!i) throw std::runtime_error(fmt::format("{}: the model needs tensor '{}', which the file does not have", file_->name(), name));
  check_shape(*file_, *i, expected);  // the whole tensor, before part_shape splits it
  return *i;
}

std::array<int64_t, 4> Weights::part_shape(const gguf::TensorInfo& i, Split split) const {
  std::array<int64_t, 4> ne{i.ne[0], i.ne[1], i.ne[2], i.ne[3]};
  if (!shard_.split() || split == Split::NONE) return ne;
  // ROWS splits ne[1] of a matrix, ne[0] of a vector (a bias has one element per output row);
  // EXPERTS ne[2] of a stack of expert matrices.
  const int dim = split == Split::EXPERTS ? 2 : split == Split::COLUMNS || i.n_dims == 1 ? 0 : 1;
  if (split == Split::EXPERTS ? i.n_dims != 3 : i.ne[2] != 1 || i.ne[3] != 1)
    throw std::invalid_argument(fmt::format("{}: tensor '{}' [{}] has {} dims and cannot be split {} over {} ranks",
                                            file_->name(), i.name, fmt::join(ne, ", "), i.n_dims,
                                            split == Split::EXPERTS ? "by expert" : "by rows or columns", shard_.n));
  if (ne[static_cast<size_t>(dim)] % shard_.n != 0)
    throw std::invalid_argument(fmt::format("{}: dim {} of tensor '{}' ({}) is not a multiple of the {} tensor-parallel ranks",
                                            file_->name(), dim, i.name, ne[static_cast<size_t>(dim)], shard_.n));
  ne[static_cast<size_t>(dim)] /= shard_.n;
  if (dim == 0 && ne[0] % dtype_block_size(i.type) != 0)
    throw std::invalid_argument(fmt::format("{}: a rank's {} of the {} elements of each row of tensor '{}' would cut a {} block of {}",
                                            file_->name(), ne[0], i.ne[0], i.name, dtype_name(i.type),
                                            dtype_block_size(i.type)));
  return ne;
}

void Weights::upload_part(Tensor& dst, size_t offset, const gguf::TensorInfo& i, Split split) {
  const auto ne = part_shape(i, split);
  const size_t row = dtype_row_size(i.type, i.ne[0]), part_row = dtype_row_size(i.type, ne[0]);
  const int64_t rows = ne[1] * ne[2] * ne[3];
  const auto r = static_cast<size_t>(shard_.rank);
  if (ne[0] == i.ne[0] || rows == 1) {
    // The whole tensor, or a range of the outermost split dim: whole rows (ROWS of a matrix),
    // whole experts (EXPERTS) or part of one row (a vector's ROWS). One contiguous span of the
    // file, rank r's the r-th, uploaded as it lies.
    const size_t bytes = part_row * static_cast<size_t>(rows);
    const bool whole = ne == std::array<int64_t, 4>{i.ne[0], i.ne[1], i.ne[2], i.ne[3]};
    backend_.set_tensor(dst, i.data + (whole ? 0 : r * bytes), offset, bytes);
    return;
  }
  // COLUMNS: the rank's piece of every row, gathered, then one upload.
  std::vector<uint8_t> out(part_row * static_cast<size_t>(rows));
  for (int64_t k = 0; k < rows; ++k)
    std::memcpy(out.data() + static_cast<size_t>(k) * part_row, i.data + static_cast<size_t>(k) * row + r * part_row, part_row);
  backend_.set_tensor(dst, out.data(), offset, out.size());
}

Tensor* Weights::get_split(std::string_view name, Split split, const Shape& expected) {
  if (!shard_.split() || split == Split::NONE) return get(name, expected);
  if (auto it = by_name_.find(std::string(name)); it != by_name_.end()) return it->second;
  const gguf::TensorInfo& i = info(name, expected);
  Tensor* t = ctx_.new_tensor(i.type, part_shape(i, split), i.name);
  t->flags |= kTensorWeight;
  buffers_.push_back(backend_.alloc_buffer(t->nbytes()));
  bind_tensor(*t, *buffers_.back(), 0);
  upload_part(*t, 0, i, split);
  if (!backend_.is_host()) device_bytes_ += t->nbytes();
  by_name_.emplace(i.name, t);
  return t;
}

Tensor* Weights::find_split(std::string_view name, Split split, const Shape& expected) {
  return file_->find_tensor(name) ? get_split(name, split, expected) : nullptr;
}

Tensor* Weights::constant(std::string_view name, DType type, const Shape& shape, const void* data) {
  if (dtype_is_quantized(type) || shape.empty() || shape.size() > 4)
    throw std::invalid_argument(fmt::format("weights: constant '{}' must be a non-block dtype of 1 to 4 dims", name));
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  std::copy(shape.begin(), shape.end(), ne.begin());
  Tensor* t = ctx_.new_tensor(type, ne, name);
  t->flags |= kTensorWeight;
  buffers_.push_back(backend_.alloc_buffer(t->nbytes()));
  bind_tensor(*t, *buffers_.back(), 0);
  backend_.set_tensor(*t, data, 0, t->nbytes());
  if (!backend_.is_host()) device_bytes_ += t->nbytes();
  return t;
}

Tensor* Weights::get(std::string_view name, const Shape& expected) { return load(name, true, expected); }
Tensor* Weights::find(std::string_view name, const Shape& expected) { return load(name, false, expected); }

std::vector<std::string> Weights::unused() const {
  std::vector<std::string> r;
  for (const gguf::TensorInfo& i : file_->tensors())
    if (!by_name_.contains(i.name)) r.push_back(i.name);
  return r;
}

std::vector<Tensor*> Weights::get_concat_rows(std::initializer_list<Part> parts, Split split) {
  if (split == Split::COLUMNS) throw std::logic_error("get_concat_rows: only rows (Split::ROWS) can be concatenated");
  std::vector<const gguf::TensorInfo*> infos;
  for (const Part& p : parts) infos.push_back(&info(p.name, p.expected));
  const auto joins = [&](size_t i) {  // part i can share one tensor with part i - 1
    const gguf::TensorInfo &a = *infos[i - 1], &b = *infos[i];
    return a.type == b.type && a.ne[0] == b.ne[0] && a.ne[2] == 1 && a.ne[3] == 1 && b.ne[2] == 1 && b.ne[3] == 1;
  };
  std::vector<Tensor*> out;
  const Part* list = parts.begin();
  for (size_t i0 = 0, i1; i0 < parts.size(); i0 = i1) {
    for (i1 = i0 + 1; i1 < parts.size() && joins(i1);) ++i1;
    if (i1 - i0 == 1) {
      out.push_back(get_split(list[i0].name, split, list[i0].expected));
      continue;
    }
    int64_t rows = 0;
    for (size_t i = i0; i < i1; ++i) rows += part_shape(*infos[i], split)[1];
    const size_t bytes = dtype_row_size(infos[i0]->type, infos[i0]->ne[0]) * static_cast<size_t>(rows);
    std::string root_name;
    for (size_t i = i0; i < i1; ++i) root_name += (root_name.empty() ? "" : "|") + infos[i]->name;
    Tensor* root = ctx_.new_tensor(infos[i0]->type, {infos[i0]->ne[0], rows}, root_name);
    root->flags |= kTensorWeight;
    buffers_.push_back(backend_.alloc_buffer(bytes));
    bind_tensor(*root, *buffers_.back(), 0);
    size_t off = 0;
    int64_t row0 = 0;
    for (size_t i = i0; i < i1; ++i) {
      upload_part(*root, off, *infos[i], split);
      const int64_t n_rows = part_shape(*infos[i], split)[1];
      Tensor* v = slice(ctx_, root, 1, row0, n_rows);
      v->name = infos[i]->name;
      v->flags |= kTensorWeight;
      by_name_.emplace(infos[i]->name, v);
      out.push_back(v);
      off += static_cast<size_t>(n_rows) * root->nb[1];
      row0 += n_rows;
    }
    if (!backend_.is_host()) device_bytes_ += bytes;
  }
  return out;
}

}  // namespace minfer
