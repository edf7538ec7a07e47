// A GGUF metadata value: a typed view into the bytes of an open gguf::File.
//
// Values are never copied out of the file when it is opened: a string is a view into the mapped
// bytes, an array is (element type, count, pointer). Conversions happen in the getters:
//   - integer getters (`as<uint32_t>()`, ...) accept any of the eight integer value types whose
//     value fits the requested C++ type, and throw Error otherwise;
//   - float getters accept FLOAT32 and FLOAT64 (a finite FLOAT64 beyond the float range throws);
//   - bool accepts BOOL only, strings STRING only.
// Every Error names the file, the key and (for arrays) the element index.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "gguf/types.h"

namespace minfer::gguf {

namespace detail {
struct ValueAccess;

template <class T>
inline constexpr bool kIsScalar =
    std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> ||
    std::is_same_v<T, uint16_t> || std::is_same_v<T, int16_t> || std::is_same_v<T, uint32_t> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, uint64_t> || std::is_same_v<T, int64_t> ||
    std::is_same_v<T, float> || std::is_same_v<T, double>;

// The GGUF value type that stores a T exactly (for the zero-conversion fast path).
template <class T>
constexpr ValueType native_value_type() {
  if constexpr (std::is_same_v<T, bool>) return ValueType::BOOL;
  else if constexpr (std::is_same_v<T, uint8_t>) return ValueType::UINT8;
  else if constexpr (std::is_same_v<T, int8_t>) return ValueType::INT8;
  else if constexpr (std::is_same_v<T, uint16_t>) return ValueType::UINT16;
  else if constexpr (std::is_same_v<T, int16_t>) return ValueType::INT16;
  else if constexpr (std::is_same_v<T, uint32_t>) return ValueType::UINT32;
  else if constexpr (std::is_same_v<T, int32_t>) return ValueType::INT32;
  else if constexpr (std::is_same_v<T, uint64_t>) return ValueType::UINT64;
  else if constexpr (std::is_same_v<T, int64_t>) return ValueType::INT64;
  else if constexpr (std::is_same_v<T, float>) return ValueType::FLOAT32;
  else if constexpr (std::is_same_v<T, double>) return ValueType::FLOAT64;
  else if constexpr (std::is_same_v<T, std::string_view>) return ValueType::STRING;
  else static_assert(sizeof(T) == 0, "not a GGUF scalar type");
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace detail

/// One metadata key/value of a File. Valid while the File it came from is alive (moving the File
/// keeps it valid).
class Value {
 public:
  std::string_view key() const { return key_; }
  ValueType type() const { return type_; }
  bool is_array() const { return type_ == ValueType::ARRAY; }
  /// Element type of an ARRAY. Throws Error when the value is not an array.
  ValueType array_type() const;
  /// Element count of an ARRAY. Throws Error when the value is not an array.
  uint64_t array_size() const;

  /// The scalar converted to T (see the file comment for the accepted types). T is one of bool,
  /// the fixed-width integers, float, double or std::string_view. Throws Error on a type mismatch
  /// or a value that does not fit.
  template <class T>
  T as() const;
  std::string_view as_string() const { return as<std::string_view>(); }

  /// Every element of a numeric/bool ARRAY converted to T with the scalar rules (a copy: array
  /// data in the file need not be aligned for T). Throws Error naming the first bad element.
  template <class T>
  std::vector<T> as_array() const;

  /// Every element of a STRING ARRAY, as views into the file bytes. Throws Error otherwise.
  std::vector<std::string_view> as_string_array() const;

  /// The value's encoded payload as stored in the file, little-endian: a scalar's bytes, a
  /// string's characters, or an array's element region (for string arrays: each element with its
  /// u64 length prefix). Used by Writer to copy values verbatim.
  std::span<const uint8_t> raw() const { return {data_, nbytes_}; }

  /// Human-readable rendering for dumps: numbers as text, strings quoted and escaped (cut after
  /// `max_chars` characters), arrays as "[type x n] e0, e1, ..." with at most `max_elems` elements.
  std::string to_string(size_t max_elems = 8, size_t max_chars = 200) const;

 private:
  friend struct detail::ValueAccess;

  template <class T>
  T convert(ValueType t, const uint8_t* p, uint64_t index) const;
  template <class T, class S>
  T narrow(S v, ValueType t, uint64_t index) const;
  [[noreturn]] void fail_type(ValueType actual, std::string_view wanted, uint64_t index) const;
  [[noreturn]] void fail_range(const std::string& value, ValueType actual, std::string_view wanted,
                               uint64_t index) const;

  static constexpr uint64_t kScalar = std::numeric_limits<uint64_t>::max();

  std::string_view key_;
  ValueType type_ = ValueType::UINT8;
  ValueType elem_type_ = ValueType::UINT8;  // arrays only
  uint64_t count_ = 0;                      // arrays only
  const uint8_t* data_ = nullptr;
  size_t nbytes_ = 0;
  const std::string* file_ = nullptr;  // for error messages
};

namespace detail {
template <class T>
constexpr std::string_view cpp_type_name() {
  if constexpr (std::is_same_v<T, std::string_view>) return "string";
  else return value_type_name(native_value_type<T>());
}
}  // namespace detail

template <class T, class S>
T Value::narrow(S v, ValueType t, uint64_t index) const {
  if (!std::in_range<T>(v)) fail_range(std::to_string(v), t, detail::cpp_type_name<T>(), index);
  return static_cast<T>(v);
}

template <class T>
T Value::convert(ValueType t, const uint8_t* p, uint64_t index) const {
  static_assert(detail::kIsScalar<T>, "T must be bool, a fixed-width integer, float or double");
  using detail::load;
  if constexpr (std::is_same_v<T, bool>) {
    if (t != ValueType::BOOL) fail_type(t, "bool", index);
    return p[0] != 0;
  } else if constexpr (std::is_integral_v<T>) {
    switch (t) {
      case ValueType::UINT8: return narrow<T>(load<uint8_t>(p), t, index);
      case ValueType::INT8: return narrow<T>(load<int8_t>(p), t, index);
      case ValueType::UINT16: return narrow<T>(load<uint16_t>(p), t, index);
      case ValueType::INT16: return narrow<T>(load<int16_t>(p), t, index);
      case ValueType::UINT32: return narrow<T>(load<uint32_t>(p), t, index);
      case ValueType::INT32: return narrow<T>(load<int32_t>(p), t, index);
      case ValueType::UINT64: return narrow<T>(load<uint64_t>(p), t, index);
      case ValueType::INT64: return narrow<T>(load<int64_t>(p), t, index);
      default: fail_type(t, detail::cpp_type_name<T>(), index);
    }
  } else {
    if (t == ValueType::FLOAT32) return static_cast<T>(load<float>(p));
    if (t != ValueType::FLOAT64) fail_type(t, detail::cpp_type_name<T>(), index);
    const double d = load<double>(p);
    if constexpr (std::is_same_v<T, float>) {
      // Narrowing a finite double beyond the float range is undefined behaviour in C++.
      if (d > std::numeric_limits<float>::max() || d < std::numeric_limits<float>::lowest())
        fail_range(std::to_string(d), t, "float32", index);
    }
    return static_cast<T>(d);
  }
}

template <class T>
T Value::as() const {
  if constexpr (std::is_same_v<T, std::string_view>) {
    if (type_ != ValueType::STRING) fail_type(type_, "string", kScalar);
    return {reinterpret_cast<const char*>(data_), nbytes_};
  } else {
    if (type_ == ValueType::STRING || type_ == ValueType::ARRAY)
      fail_type(type_, detail::cpp_type_name<T>(), kScalar);
    return convert<T>(type_, data_, kScalar);
  }
}

template <class T>
std::vector<T> Value::as_array() const {
  static_assert(detail::kIsScalar<T>, "use as_string_array() for string arrays");
  if (type_ != ValueType::ARRAY) fail_type(type_, "array", kScalar);
  if (elem_type_ == ValueType::STRING) fail_type(elem_type_, detail::cpp_type_name<T>(), 0);
  std::vector<T> out;
  if constexpr (!std::is_same_v<T, bool>) {
    if (elem_type_ == detail::native_value_type<T>()) {
      out.resize(count_);
      if (count_ != 0) std::memcpy(out.data(), data_, count_ * sizeof(T));
      return out;
    }
  }
  out.reserve(count_);
  const size_t es = value_type_size(elem_type_);
  for (uint64_t i = 0; i < count_; ++i) out.push_back(convert<T>(elem_type_, data_ + i * es, i));
  return out;
}

}  // namespace minfer::gguf
