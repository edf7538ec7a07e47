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
  NONE,     ///< every rank holds all of it (norms, the MoE router)
  ROWS,     ///< column-parallel: rows (ne[1]) of [K, M], i.e. output features (q/k/v, gate/up,
            ///< the vocab-parallel embedding and LM head); a 1-D tensor (a bias) splits its
            ///< elements the same way
  COLUMNS,  ///< row-parallel: the K (ne[0]) elements of every row (attention output, down); the
            ///< rank's outputs are partial sums for ops::all_reduce
  EXPERTS,  ///< expert-parallel: whole experts (ne[2]) of [K, M, n_expert] (ffn_*_exps)
};

class Weights {
 public:
  /// Keeps `file` open for as long as the weights live (host tensors point into its mapping).
  /// A split `shard` makes get_split() return the rank's parts (copied into backend memory).
  Weights(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard = {});
  ~Weights();
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;

  /// The shape a model expects a tensor to have in the file, from its hyper-parameters: GGUF's
  /// element counts ne[0], ne[1], ... (whatever the dtype, quantized too) of the whole tensor,
  /// before any rank's split; dims past the list are 1 (llama.cpp's check_tensor_dims).
  using Shape = std::vector<int64_t>;

  /// The tensor `name` (GGUF name, e.g. "blk.3.attn_q.weight"), loaded on first request.
  /// Throws std::runtime_error naming the tensor and the file when it is absent, or when its
  /// shape is not `expected` (the message names the tensor, the expected and the found shape).
  Tensor* get(std::string_view name, const Shape& expected);
  /// Like get(), or nullptr when the file has no such tensor (a present one is still checked).
  Tensor* find(std::string_view name, const Shape& expected);

  /// This rank's part of tensor `name` (get() when the shard is not split or `split` is NONE):
  /// rank r of n holds the r-th of n equal ranges of the split dimension. Throws
  /// std::runtime_error when the tensor is absent or not of shape `expected` (checked on the
  /// whole tensor, first), std::invalid_argument when the split dimension is not a multiple of
  /// the shard count, when ROWS / COLUMNS meet a tensor of more than 2 dims (EXPERTS: of other
  /// than 3), or (COLUMNS) a rank's part would cut a quantization block, naming the tensor.
  Tensor* get_split(std::string_view name, Split split, const Shape& expected);
  /// Like get_split(), or nullptr when the file has no such tensor (an untied output.weight).
  Tensor* find_split(std::string_view name, Split split, const Shape& expected);

  /// A tensor that is not in the file but derived from its hyper-parameters at load (a rank's
  /// index maps, models/layers.h ShardRange): `data` (row-major, shape's element count of `type`,
  /// not a block dtype) copied into backend memory, named `name` for messages. Lives as long as
  /// the weights; not a file tensor (unused() does not list it).
  Tensor* constant(std::string_view name, DType type, const Shape& shape, const void* data);

  /// A tensor get_concat_rows() loads: its name and expected shape, as for get().
  struct Part {
    std::string_view name;
    Shape expected;
  };
  /// Loads each run of consecutive `parts` with the same dtype and row length (2-D) into one
  /// tensor of concatenated rows and returns one view per part, in order; a part alone in its run
  /// is loaded by itself (the fused op then runs a matmul per run: a Q4_K_M file's q|k as one and
  /// a Q6_K attn_v apart). With `split` ROWS, each part's rows of this rank. Shapes are checked as
  /// by get_split().
  std::vector<Tensor*> get_concat_rows(std::initializer_list<Part> parts, Split split = Split::NONE);

  /// The file's tensors that no get / find / get_split / get_concat_rows has loaded, in file
  /// order (a model that leaves some unused does not understand the file: llama.cpp refuses it).
  std::vector<std::string> unused() const;

  const Shard& shard() const { return shard_; }

  /// Bytes of weight data resident on the backend (0 for mapped host weights).
  size_t device_bytes() const { return device_bytes_; }
  Backend& backend() const { return backend_; }
  const gguf::File& file() const { return *file_; }

 private:
  Tensor* load(std::string_view name, bool required, const Shape& expected);
  // The file's tensor `name`, its shape checked against `expected`; throws when absent.
  const gguf::TensorInfo& info(std::string_view name, const Shape& expected) const;
  // The shape of this rank's part of `i` (the whole tensor when not split), checked.
  std::array<int64_t, 4> part_shape(const gguf::TensorInfo& i, Split split) const;
  // Writes this rank's part of `i` into `dst` at byte `offset`: straight from the file when the
  // part is contiguous there (everything but COLUMNS of a matrix), else gathered row by row first.
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
