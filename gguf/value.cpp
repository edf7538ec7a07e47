#include <fmt/format.h>

#include "gguf/escape.h"
#include "gguf/value.h"

namespace minfer::gguf {

namespace {
std::string where(const std::string* file, std::string_view key, uint64_t index,
                  uint64_t scalar) {
  std::string s = fmt::format("{}: key {}", file ? *file : std::string("<gguf>"), quote(key));
  if (index != scalar) s += fmt::format(", element {}", index);
  return s;
}
}  // namespace

void Value::fail_type(ValueType actual, std::string_view wanted, uint64_t index) const {
  std::string actual_name(value_type_name(actual));
  if (actual == ValueType::ARRAY)
    actual_name = fmt::format("array of {}", value_type_name(elem_type_));
  throw Error(fmt::format("{}: has type {}, expected {}", where(file_, key_, index, kScalar),
                          actual_name, wanted));
}

void Value::fail_range(const std::string& value, ValueType actual, std::string_view wanted,
                       uint64_t index) const {
  throw Error(fmt::format("{}: {} value {} does not fit in {}", where(file_, key_, index, kScalar),
                          value_type_name(actual), value, wanted));
}

ValueType Value::array_type() const {
  if (type_ != ValueType::ARRAY) fail_type(type_, "array", kScalar);
  return elem_type_;
}

uint64_t Value::array_size() const {
  if (type_ != ValueType::ARRAY) fail_type(type_, "array", kScalar);
  return count_;
}

std::vector<std::string_view> Value::as_string_array() const {
  if (type_ != ValueType::ARRAY) fail_type(type_, "array of string", kScalar);
  if (elem_type_ != ValueType::STRING) fail_type(type_, "array of string", kScalar);
  std::vector<std::string_view> out;
  out.reserve(count_);
  // The region was bounds-checked element by element when the file was opened; the checks here
  // only guard against a Value that was not made by the parser.
  size_t pos = 0;
  for (uint64_t i = 0; i < count_; ++i) {
    if (nbytes_ - pos < 8) fail_range("(corrupt)", elem_type_, "string", i);
    const uint64_t len = detail::load<uint64_t>(data_ + pos);
    pos += 8;
    if (len > nbytes_ - pos) fail_range("(corrupt)", elem_type_, "string", i);
    out.emplace_back(reinterpret_cast<const char*>(data_ + pos), static_cast<size_t>(len));
    pos += len;
  }
  return out;
}

namespace {
std::string scalar_to_string(ValueType t, const uint8_t* p) {
  using detail::load;
  switch (t) {
    case ValueType::UINT8: return std::to_string(load<uint8_t>(p));
    case ValueType::INT8: return std::to_string(load<int8_t>(p));
    case ValueType::UINT16: return std::to_string(load<uint16_t>(p));
    case ValueType::INT16: return std::to_string(load<int16_t>(p));
    case ValueType::UINT32: return std::to_string(load<uint32_t>(p));
    case ValueType::INT32: return std::to_string(load<int32_t>(p));
    case ValueType::UINT64: return std::to_string(load<uint64_t>(p));
    case ValueType::INT64: return std::to_string(load<int64_t>(p));
    case ValueType::FLOAT32: return fmt::format("{}", load<float>(p));
    case ValueType::FLOAT64: return fmt::format("{}", load<double>(p));
    case ValueType::BOOL: return p[0] ? "true" : "false";
    default: return "?";
  }
}
}  // namespace

std::string Value::to_string(size_t max_elems, size_t max_chars) const {
  if (type_ == ValueType::STRING) return quote(as_string(), max_chars, '"');
  if (type_ != ValueType::ARRAY) return scalar_to_string(type_, data_);
  std::string s = fmt::format("[{} x {}]", value_type_name(elem_type_), count_);
  const uint64_t shown = std::min<uint64_t>(count_, max_elems);
  if (elem_type_ == ValueType::STRING) {
    size_t pos = 0;
    for (uint64_t i = 0; i < shown && nbytes_ - pos >= 8; ++i) {
      const uint64_t len = detail::load<uint64_t>(data_ + pos);
      pos += 8;
      if (len > nbytes_ - pos) break;
      s += (i ? ", " : " ");
      s += quote({reinterpret_cast<const char*>(data_ + pos), static_cast<size_t>(len)}, max_chars, '"');
      pos += len;
    }
  } else {
    const size_t es = value_type_size(elem_type_);
    for (uint64_t i = 0; i < shown; ++i)
      s += (i ? ", " : " ") + scalar_to_string(elem_type_, data_ + i * es);
  }
  if (shown < count_) s += ", ...";
  return s;
}

}  // namespace minfer::gguf
