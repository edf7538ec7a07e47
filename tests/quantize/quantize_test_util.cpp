#include "quantize_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>

#include "tensor/quants.h"

namespace minfer::test {

TempPath::TempPath(const std::string& stem) {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(rd() % 100000) +
           ".gguf");
}

TempPath::~TempPath() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  std::filesystem::remove(path_.string() + ".tmp", ec);
}

std::vector<float> dequantize_tensor(const gguf::TensorInfo& t) {
  const int64_t n = t.nelements();
  const int64_t row = t.ne[0];
  std::vector<float> out(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
  const size_t row_bytes = dtype_row_size(t.type, row);
  for (int64_t r = 0; r < n / row; ++r)
    dequantize_row(t.type, t.data + static_cast<size_t>(r) * row_bytes, out.data() + r * row, row);
  return out;
}

RunResult run_command(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("popen failed for " + cmd);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace minfer::test
