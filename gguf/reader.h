// Strict, zero-copy GGUF reader (versions 2 and 3, little-endian).
//
// Layout read (GGUF spec, ggml docs/gguf.md):
//   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x  { string key | u32 value type | value }
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }
//   padding to `general.alignment` (default 32) | data section (tensor offsets are relative to it)
// where string = u64 length + bytes. Everything is validated when the File is constructed (see
// docs/gguf.md for the full rule list); afterwards no accessor reads outside the file.
//
// Example:
//   minfer::gguf::File f("model.gguf");
//   uint32_t n_layer = f.get_u32("qwen3.block_count");
//   float eps = f.get_f32_or("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
//   auto tokens = f.get_string_array("tokenizer.ggml.tokens");   // views into the mapping
//   const minfer::gguf::TensorInfo& w = f.tensor("token_embd.weight");
//   // w.type, w.ne[0] (row length), w.ne[1] (rows), w.data (w.nbytes bytes inside the file)
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/types.h"
#include "gguf/value.h"
#include "tensor/dtype.h"

namespace minfer::gguf {

/// One tensor of a GGUF file. Shapes are in ggml order: ne[0] is the contiguous (innermost)
/// dimension, i.e. the row length; dims past n_dims are 1.
struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;                      ///< 1..4 as stored in the file
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  ///< element counts, each >= 0
  uint64_t offset = 0;                 ///< from the start of the data section; alignment multiple
  size_t nbytes = 0;                   ///< dtype_nbytes(type, nelements())
  const uint8_t* data = nullptr;       ///< the tensor's bytes inside the file (nbytes of them)

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

/// An open, fully validated GGUF file. Read-only; movable, not copyable. Values, TensorInfos and
/// string views stay valid while the File (or the File it was moved into) is alive. A moved-from
/// File may only be destroyed or assigned to.
class File {
 public:
  /// Maps `path` read-only and validates it. Throws Error (naming the path) when the file cannot
  /// be opened or is not a valid GGUF file.
  explicit File(const std::filesystem::path& path);

  /// Parses a GGUF image in memory that the caller keeps alive (and unchanged) for the File's
  /// lifetime. `name` stands for the path in error messages.
  static File from_memory(std::span<const uint8_t> bytes, std::string name = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  /// The path, or the name given to from_memory.
  const std::string& name() const;
  uint32_t version() const;
  /// The data-section alignment: `general.alignment` or 32.
  uint32_t alignment() const;
  /// Absolute byte offset of the data section (end of the tensor infos rounded up to alignment).
  uint64_t data_offset() const;
  /// The whole file.
  std::span<const uint8_t> bytes() const;

  // ---- metadata ----
  /// All key/values in file order.
  std::span<const Value> kvs() const;
  size_t n_kv() const { return kvs().size(); }
  /// The value of `key`, or nullptr.
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  /// The value of `key`. Throws Error when the key is absent.
  const Value& get(std::string_view key) const;

  /// Typed getters: throw Error when the key is absent, has an incompatible type or a value that
  /// does not fit (integer getters accept every integer type whose value fits; see value.h).
  uint32_t get_u32(std::string_view key) const { return get(key).as<uint32_t>(); }
  int32_t get_i32(std::string_view key) const { return get(key).as<int32_t>(); }
  uint64_t get_u64(std::string_view key) const { return get(key).as<uint64_t>(); }
  int64_t get_i64(std::string_view key) const { return get(key).as<int64_t>(); }
  float get_f32(std::string_view key) const { return get(key).as<float>(); }
  double get_f64(std::string_view key) const { return get(key).as<double>(); }
  bool get_bool(std::string_view key) const { return get(key).as<bool>(); }
  std::string_view get_string(std::string_view key) const { return get(key).as_string(); }
  std::vector<std::string_view> get_string_array(std::string_view key) const {
    return get(key).as_string_array();
  }
  template <class T>
  std::vector<T> get_array(std::string_view key) const {
    return get(key).as_array<T>();
  }

  /// The converted value, or std::nullopt when the key is absent. A present key with an
  /// incompatible type still throws (a wrong type is a broken file, not a missing key).
  template <class T>
  std::optional<T> get_optional(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    return v->as<T>();
  }
  /// `get_*_or`: like the getters, but `def` when the key is absent.
  uint32_t get_u32_or(std::string_view key, uint32_t def) const { return or_(key, def); }
  int32_t get_i32_or(std::string_view key, int32_t def) const { return or_(key, def); }
  uint64_t get_u64_or(std::string_view key, uint64_t def) const { return or_(key, def); }
  int64_t get_i64_or(std::string_view key, int64_t def) const { return or_(key, def); }
  float get_f32_or(std::string_view key, float def) const { return or_(key, def); }
  double get_f64_or(std::string_view key, double def) const { return or_(key, def); }
  bool get_bool_or(std::string_view key, bool def) const { return or_(key, def); }
  std::string_view get_string_or(std::string_view key, std::string_view def) const {
    return or_(key, def);
  }

  // ---- tensors ----
  /// All tensors in file order.
  std::span<const TensorInfo> tensors() const;
  size_t n_tensors() const { return tensors().size(); }
  /// The tensor named `name`, or nullptr.
  const TensorInfo* find_tensor(std::string_view name) const;
  /// The tensor named `name`. Throws Error when absent.
  const TensorInfo& tensor(std::string_view name) const;

 private:
  struct Impl;
  explicit File(std::unique_ptr<Impl> impl);
  template <class T>
  T or_(std::string_view key, T def) const {
    const Value* v = find(key);
    return v ? v->as<T>() : def;
  }

  std::unique_ptr<Impl> impl_;
};

}  // namespace minfer::gguf
