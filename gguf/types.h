// GGUF basics shared by the reader and the writer: the error type, the metadata value types and
// the format constants.
//
// Source of every constant: the GGUF specification (ggml docs/gguf.md, versions 2 and 3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace minfer::gguf {

/// Every GGUF problem — malformed file, missing key, wrong value type, I/O failure — is reported
/// with this exception. Messages name the file, the field / key / tensor and the offending value.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Metadata value type ids (`gguf_metadata_value_type` in the spec). The numeric values are the
/// ids stored in the file.
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,     ///< one byte, 0 or 1
  STRING = 8,   ///< u64 length + UTF-8 bytes, no terminator
  ARRAY = 9,    ///< u32 element type + u64 count + elements (no nested arrays here)
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

/// "GGUF" read as a little-endian u32.
inline constexpr uint32_t kMagic = 0x46554747u;
/// The version the writer produces; the reader accepts 2 and 3 (same layout, v3 adds big-endian
/// files, which minfer does not read).
inline constexpr uint32_t kVersion = 3;
/// Data-section alignment when `general.alignment` is absent.
inline constexpr uint32_t kDefaultAlignment = 32;
/// GGML_MAX_DIMS.
inline constexpr int kMaxDims = 4;
/// Longest tensor name the spec allows, in bytes.
inline constexpr size_t kMaxTensorName = 64;
/// Longest key the spec allows, in bytes (2^16 - 1).
inline constexpr size_t kMaxKeyLength = 65535;
/// The key that sets the data-section alignment (u32, non-zero multiple of 8).
inline constexpr std::string_view kAlignmentKey = "general.alignment";

/// Lower-case spec name of `t` ("uint8", ..., "float64"); "unknown" for a value outside the enum.
std::string_view value_type_name(ValueType t);

/// The ValueType with id `id`, or std::nullopt when the id is not one of the 13 spec types.
std::optional<ValueType> value_type_from_id(uint32_t id);

/// Bytes of one scalar of type `t`; 0 for STRING and ARRAY (variable size).
size_t value_type_size(ValueType t);

/// True for the eight integer types (BOOL is not an integer).
bool value_type_is_integer(ValueType t);

/// True for UINT8, UINT16, UINT32 and UINT64.
bool value_type_is_unsigned(ValueType t);

}  // namespace minfer::gguf
