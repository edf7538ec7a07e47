// libFuzzer target for the GGUF reader: parse the input as a GGUF image, then touch every value
// and every tensor byte range through the public API. gguf::Error is the expected outcome for
// malformed input; anything else (crash, sanitizer report, other exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "gguf/gguf.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads from being optimised away

void walk_value(const minfer::gguf::Value& v) {
  using minfer::gguf::ValueType;
  uint64_t acc = v.key().size() + v.to_string(4, 32).size();
  switch (v.type()) {
    case ValueType::STRING: acc += v.as_string().size(); break;
    case ValueType::ARRAY:
      if (v.array_type() == ValueType::STRING) {
        for (std::string_view s : v.as_string_array()) acc += s.size() ? s.front() : 0;
      } else if (v.array_type() == ValueType::BOOL) {
        acc += v.as_array<bool>().size();
      } else if (v.array_type() == ValueType::FLOAT32 || v.array_type() == ValueType::FLOAT64) {
        for (double d : v.as_array<double>()) acc += d != 0;
      } else {
        try {
          for (int64_t x : v.as_array<int64_t>()) acc += static_cast<uint64_t>(x);
        } catch (const minfer::gguf::Error&) {  // uint64 values above INT64_MAX
        }
      }
      break;
    case ValueType::BOOL: acc += v.as<bool>(); break;
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: acc += v.as<double>() != 0; break;
    default:
      try {
        acc += static_cast<uint64_t>(v.as<int64_t>());
      } catch (const minfer::gguf::Error&) {
      }
      try {
        acc += v.as<uint32_t>();
      } catch (const minfer::gguf::Error&) {
      }
  }
  g_sink = g_sink + acc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = minfer::gguf::File::from_memory(std::span<const uint8_t>(data, size), "fuzz");
    for (const minfer::gguf::Value& v : f.kvs()) {
      walk_value(v);
      if (f.find(v.key()) == nullptr) std::abort();
    }
    const uint8_t* end = data + size;
    for (const minfer::gguf::TensorInfo& t : f.tensors()) {
      if (f.find_tensor(t.name) != &t) std::abort();
      if (t.data < data || t.data > end || t.nbytes > static_cast<size_t>(end - t.data))
        std::abort();
      if (t.nbytes != 0) g_sink = g_sink + t.data[0] + t.data[t.nbytes - 1];
      if (t.offset % f.alignment() != 0) std::abort();
    }
  } catch (const minfer::gguf::Error&) {
  }
  return 0;
}
