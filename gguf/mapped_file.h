// Read-only memory mapping of a whole file (internal to minfer_gguf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace minfer::gguf {

/// Owns a read-only private mapping of a regular file; unmapped on destruction. An empty file
/// maps to (nullptr, 0). Throws gguf::Error naming the path when the file cannot be opened,
/// is not a regular file, or cannot be mapped.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::filesystem::path& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace minfer::gguf
