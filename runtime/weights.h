// Weights: a model's parameters as tensors on one backend, loaded from a GGUF file.
//
// On a host backend the tensors point straight into the memory-mapped file (no copy); on a
// device backend they are uploaded once and stay resident. Groups of weights that one fused
// matmul reads (wq|wk|wv, gate|up) can be loaded into one concatenated tensor whose row ranges
// are returned as views (ops::adjacent_rows recognises them).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensor/backend.h"
#include "tensor/context.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

class Weights {
 public:
  /// Keeps `file` open for as long as the weights live (host tensors point into its mapping).
  Weights(std::shared_ptr<const gguf::File> file, Backend& backend);
  ~Weights();
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;

  /// The tensor `name` (GGUF name, e.g. "blk.3.attn_q.weight"), loaded on first request.
  /// Throws std::runtime_error naming the tensor and the file when it is absent.
  Tensor* get(std::string_view name);
  /// Like get(), or nullptr when the file has no such tensor.
  Tensor* find(std::string_view name);

  /// Loads `names` (2-D, same dtype and row length) into one tensor of concatenated rows and
  /// returns one view per name, in order. When the dtypes or row lengths differ, returns the
  /// separately loaded tensors instead (the fused op then runs separate matmuls).
  std::vector<Tensor*> get_concat_rows(std::initializer_list<std::string_view> names);

  /// Bytes of weight data resident on the backend (0 for mapped host weights).
  size_t device_bytes() const { return device_bytes_; }
  Backend& backend() const { return backend_; }
  const gguf::File& file() const { return *file_; }

 private:
  Tensor* load(std::string_view name, bool required);

  std::shared_ptr<const gguf::File> file_;
  Backend& backend_;
  Context ctx_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::unique_ptr<Buffer> mapping_;
  std::unordered_map<std::string, Tensor*> by_name_;
  size_t device_bytes_ = 0;
};

}  // namespace minfer
