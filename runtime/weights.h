// Weights: a model's parameters as tensors on one backend, loaded from a GGUF file.
//
// On a host backend the tensors point straight into the memory-mapped file (no copy); on a
// device backend they are uploaded once and stay resident. Groups of weights that one fused
// matmul reads (wq|wk|wv, gate|up) can be loaded into one concatenated tensor whose row ranges
// are returned as views (ops::adjacent_rows recognises them).
#pragma once

#include <array>
#include <cstdint>
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
struct TensorInfo;
}

namespace minfer {

/// Which part of a model one rank of a tensor-parallel group holds (Megatron-LM's split): rank
/// `rank` of `n` takes the rank-th of n equal parts of every split weight.
struct Shard {
  int rank = 0;
  int n = 1;
  bool split() const { return n > 1; }
};

/// How a weight is split over the ranks of a Shard.
enum class Split {
  NONE,     ///< every rank holds all of it (norms, the embedding, the LM head)
  ROWS,     ///< column-parallel: rows (ne[1]) of [K, M], i.e. output features (q/k/v, gate/up);
            ///< a 1-D tensor (a bias) splits its elements the same way
  COLUMNS,  ///< row-parallel: the K (ne[0]) elements of every row (attention output, down); the
            ///< rank's outputs are partial sums for ops::all_reduce
};

class Weights {
 public:
  /// Keeps `file` open for as long as the weights live (host tensors point into its mapping).
  /// A split `shard` makes get_split() return the rank's parts (copied into backend memory).
  Weights(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard = {});
  ~Weights();
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;

  /// The tensor `name` (GGUF name, e.g. "blk.3.attn_q.weight"), loaded on first request.
  /// Throws std::runtime_error naming the tensor and the file when it is absent.
  Tensor* get(std::string_view name);
  /// Like get(), or nullptr when the file has no such tensor.
  Tensor* find(std::string_view name);

  /// This rank's part of tensor `name` (get() when the shard is not split or `split` is NONE).
  /// Throws std::runtime_error when the tensor is absent, std::invalid_argument when the split
  /// dimension is not a multiple of the shard count or (COLUMNS) a rank's part would cut a
  /// quantization block, naming the tensor.
  Tensor* get_split(std::string_view name, Split split);

  /// Loads `names` (2-D, same dtype and row length) into one tensor of concatenated rows and
  /// returns one view per name, in order; with `split` ROWS, each name's rows of this rank. When
  /// the dtypes or row lengths differ, returns the separately loaded tensors instead (the fused
  /// op then runs separate matmuls).
  std::vector<Tensor*> get_concat_rows(std::initializer_list<std::string_view> names, Split split = Split::NONE);

  const Shard& shard() const { return shard_; }

  /// Bytes of weight data resident on the backend (0 for mapped host weights).
  size_t device_bytes() const { return device_bytes_; }
  Backend& backend() const { return backend_; }
  const gguf::File& file() const { return *file_; }

 private:
  Tensor* load(std::string_view name, bool required);
  const gguf::TensorInfo& info(std::string_view name) const;
  // The shape of this rank's part of `i` (the whole tensor when not split), checked.
  std::array<int64_t, 4> part_shape(const gguf::TensorInfo& i, Split split) const;
  // Writes this rank's part of `i` into `dst` at byte `offset`: straight from the file when the
  // part is contiguous there (everything but COLUMNS), else gathered row by row first.
  void upload_part(Tensor& dst, size_t offset, const gguf::TensorInfo& i, Split split);

  std::shared_ptr<const gguf::File> file_;
  Backend& backend_;
  Shard shard_;
  Context ctx_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::unique_ptr<Buffer> mapping_;
  std::unordered_map<std::string, Tensor*> by_name_;
  size_t device_bytes_ = 0;
};

}  // namespace minfer
