// GGUF writer (version 3, little-endian), used by quantize and mkmodel.
//
// What it writes follows the layout in gguf/reader.h: header, KVs in insertion order, tensor
// infos in insertion order, zero padding to the alignment, then each tensor's bytes followed by
// zero padding to the alignment (as ggml's gguf writer does), so every tensor offset is a
// multiple of the alignment and the file loads in ggml/llama.cpp.
//
// Example (copy metadata, override one key, stream tensors):
//   minfer::gguf::Writer w;
//   w.copy_kvs(src);                                  // every KV of a File, in its order
//   w.set_u32("general.file_type", 7);                // replaces the copied value in place
//   w.add_tensor("output_norm.weight", DType::F32, {n_embd}, norm_data);
//   w.add_tensor_streamed("token_embd.weight", DType::Q8_0, {n_embd, n_vocab},
//                         [&](const minfer::gguf::Writer::Emit& emit) {
//                           for (each row) emit(row_bytes, row_size);   // any chunking
//                         });
//   w.write("out.gguf");                               // out.gguf.XXXXXX, then rename
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>
#include <cstring>

#include "gguf/reader.h"
#include "gguf/types.h"
#include "tensor/dtype.h"

namespace minfer::gguf {

class Writer {
 public:
  /// Appends `nbytes` bytes of tensor data to the file.
  using Emit = std::function<void(const void* data, size_t nbytes)>;
  /// Produces one tensor's bytes at write time by calling `emit` with consecutive chunks whose
  /// sizes add up to exactly the tensor's byte size (Writer::write throws Error otherwise).
  using TensorSource = std::function<void(const Emit& emit)>;

  Writer();
  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;
  ~Writer();

  // ---- metadata. Setting an existing key replaces its value and keeps its position. ----
  // Keys are at most 65535 bytes (Error otherwise).
  void set_u8(std::string_view key, uint8_t v);
  void set_i8(std::string_view key, int8_t v);
  void set_u16(std::string_view key, uint16_t v);
  void set_i16(std::string_view key, int16_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  void set_string_array(std::string_view key, std::span<const std::string_view> v);
  void set_string_array(std::string_view key, std::span<const std::string> v);
  /// Numeric/bool array; T is bool, a fixed-width integer, float or double (the GGUF element
  /// type follows from T).
  template <class T>
  void set_array(std::string_view key, std::span<const T> v);
  template <class T>
  void set_array(std::string_view key, const std::vector<T>& v) {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> b(v.begin(), v.end());
      set_bool_array(key, b);
    } else {
      set_array(key, std::span<const T>(v));
    }
  }
  /// A copy of a value read from a File (any type), stored under `key`.
  void set(std::string_view key, const Value& v);
  /// Copies every KV of `f` in file order (existing keys are replaced in place).
  void copy_kvs(const File& f);
  /// Removes `key`; returns whether it was present.
  bool remove(std::string_view key);
  bool has(std::string_view key) const;
  size_t n_kv() const;

  /// A file without tensors has no data section: pad its end to the alignment anyway (true, the
  /// default, as ggml's writer does) or end right after the metadata (false, as gguf-py's
  /// vocab-only writer does). Files with tensors are always padded.
  void set_pad_empty_data(bool pad);
  /// Takes `src`'s choice of the above, so that rewriting a tensor-less file reproduces it byte
  /// for byte (copy_kvs copies the metadata).
  void copy_layout(const File& src);

  /// Sets `general.alignment` (u32). It must be a non-zero multiple of 8 and a power of two
  /// (ggml rejects other values). Without it the alignment is 32.
  void set_alignment(uint32_t alignment);

  // ---- tensors, in the order they will be written ----
  /// `ne` in ggml order (ne[0] = row length), 1..4 dims, each >= 0, ne[0] a multiple of the
  /// dtype's block size; the name is unique and shorter than 64 bytes (GGML_MAX_NAME).
  /// `data` holds dtype_nbytes(type, nelements) bytes and must stay valid until write() returns.
  void add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne,
                  const void* data);
  /// Same, with the bytes produced at write time by `source` (huge files stream).
  void add_tensor_streamed(std::string_view name, DType type, const std::vector<int64_t>& ne,
                           TensorSource source);
  size_t n_tensors() const;

  /// Writes the file to a new temporary file next to `path` (`path.XXXXXX`, mkstemp: no existing
  /// file is truncated on the way), then renames it to `path`; a symlink at `path` is written
  /// through (its target is replaced, the link kept). Throws Error naming the path on I/O
  /// failure, when `path` exists and is not a regular file (a device, a FIFO, a directory), on a
  /// bad `general.alignment`, when the tensor data exceed the free space of the target's
  /// filesystem (before anything is written), or when a TensorSource emits the wrong byte count;
  /// the temporary file is removed on failure.
  void write(const std::filesystem::path& path) const;

 private:
  struct Impl;
  void set_raw(std::string_view key, ValueType type, std::vector<uint8_t> payload);
  void set_bool_array(std::string_view key, std::span<const uint8_t> v);
  std::unique_ptr<Impl> impl_;
};

template <class T>
void Writer::set_array(std::string_view key, std::span<const T> v) {
  static_assert(detail::kIsScalar<T>, "use set_string_array for strings");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> b(v.begin(), v.end());
    set_bool_array(key, b);
  } else {
    const uint32_t et = static_cast<uint32_t>(detail::native_value_type<T>());
    const uint64_t n = v.size();
    std::vector<uint8_t> payload(4 + 8 + v.size_bytes());
    std::memcpy(payload.data(), &et, 4);
    std::memcpy(payload.data() + 4, &n, 8);
    if (n != 0) std::memcpy(payload.data() + 12, v.data(), v.size_bytes());
    set_raw(key, ValueType::ARRAY, std::move(payload));
  }
}

}  // namespace minfer::gguf
