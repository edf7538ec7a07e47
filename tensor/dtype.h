// Element types of minfer tensors.
//
// The numeric values of `DType` are the ggml/GGUF type ids (ggml.h `enum ggml_type`), so a GGUF
// tensor-info type field maps onto a DType with a range check and no table. Block types store
// `block_size` elements in `type_size` bytes; the layouts are the GGUF block definitions
// (ggml-common.h) and are documented next to their structs in tensor/quants.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace minfer {

enum class DType : int32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

/// Number of elements per K-quant super-block (QK_K in ggml).
inline constexpr int64_t kQK_K = 256;

/// Static description of a dtype.
struct DTypeTraits {
  DType type;
  std::string_view name;   ///< lower-case ggml name: "f32", "q4_K", ...
  int64_t block_size;      ///< elements per block (1 for scalar types)
  size_t type_size;        ///< bytes per block
  bool is_quantized;       ///< a GGUF block type
  bool supported;          ///< minfer can compute with it (I8/I16/I64/F64 are recognised only)
};

/// Traits of `t`. Throws std::invalid_argument for a value that is not a known DType.
const DTypeTraits& dtype_traits(DType t);

/// The DType with ggml type id `id`, or std::nullopt when the id is unknown or retired (4, 5,
/// the IQ types); used by the GGUF reader to reject unknown ids.
std::optional<DType> dtype_from_id(int64_t id);

/// The DType named `name` (case-insensitive ggml name, e.g. "q4_k", "F16"), or std::nullopt.
std::optional<DType> dtype_from_name(std::string_view name);

inline std::string_view dtype_name(DType t) { return dtype_traits(t).name; }
inline int64_t dtype_block_size(DType t) { return dtype_traits(t).block_size; }
inline size_t dtype_type_size(DType t) { return dtype_traits(t).type_size; }
inline bool dtype_is_quantized(DType t) { return dtype_traits(t).is_quantized; }

/// Bytes of one row of `n` elements. Throws std::invalid_argument when `n` is not a multiple of
/// the block size (a partial block cannot be stored) or is negative.
size_t dtype_row_size(DType t, int64_t n);

/// Bytes of `n` elements stored contiguously, with the same rules as dtype_row_size and an
/// overflow check (throws std::overflow_error).
size_t dtype_nbytes(DType t, int64_t n);

}  // namespace minfer
