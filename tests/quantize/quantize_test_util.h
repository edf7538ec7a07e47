// Helpers for the quantize / mkmodel tests: temp files, dequantizing a GGUF tensor, running a
// program and capturing its output.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace minfer::test {

/// A fresh file path in the temp directory, removed (with its .tmp sibling) on destruction.
class TempPath {
 public:
  explicit TempPath(const std::string& stem);
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// Every element of tensor `t` of `f` as f32 (via dequantize_row, row by row).
std::vector<float> dequantize_tensor(const gguf::TensorInfo& t);

struct RunResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr together
};

/// Runs `cmd` through the shell, capturing stdout+stderr.
RunResult run_command(const std::string& cmd);

/// Shell-quotes `s` with single quotes.
std::string shell_quote(const std::string& s);

}  // namespace minfer::test
