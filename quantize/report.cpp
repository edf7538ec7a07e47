#include "quantize/report.h"

#include <fmt/format.h>

namespace minfer::quantize {
namespace {

double mib(size_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

}  // namespace

std::string format_tensor_line(const TensorReport& r) {
  std::string shape;
  for (size_t d = 0; d < r.ne.size(); ++d) shape += (d ? " x " : "") + std::to_string(r.ne[d]);
  const int width = r.count >= 1000 ? 4 : 3;
  const double pct = r.elements_total ? 100.0 * static_cast<double>(r.elements_done) / static_cast<double>(r.elements_total) : 100.0;
  const int filled = static_cast<int>(pct / 10.0 + 0.5);
  const std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(10 - filled), '.');
  return fmt::format("[{:>{}}/{:>{}}] [{}] {:3.0f}% {:<32} [{}]  {:>4} -> {:<4} {:9.2f} MiB -> {:8.2f} MiB{}", r.index + 1,
                     width, r.count, width, bar, pct, r.name, shape, dtype_name(r.from), dtype_name(r.to),
                     mib(r.bytes_in), mib(r.bytes_out), r.fallback ? " (fallback: row length not a multiple of 256)" : "");
}

std::string format_summary(const Summary& s, const char* before_label, const char* after_label) {
  return fmt::format(
      "{}: {:10.2f} MiB ({:.2f} BPW)\n{}: {:10.2f} MiB ({:.2f} BPW)\n{} tensors, {:.3f} G elements, "
      "{} fallback(s) (rows whose length is not a multiple of 256 cannot hold K-quant blocks), {:.1f} s\n",
      before_label, mib(s.bytes_in), s.bpw_in(), after_label, mib(s.bytes_out), s.bpw_out(), s.n_tensors,
      static_cast<double>(s.n_elements) * 1e-9, s.n_fallback, s.seconds);
}

}  // namespace minfer::quantize
