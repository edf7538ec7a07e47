// Helpers shared by the built-in filters, tests, methods and globals (not a public header).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/jinja/builtins.h"

namespace minfer::jinja::detail {

[[noreturn]] inline void fail(const std::string& what) { throw TemplateError(what); }

inline std::string need_string(const Value& v, const char* what) {
  if (!v.is_string()) fail(std::string(what) + " must be a string, not " + v.type_name());
  return v.str.s;
}

inline int64_t need_int(const Value& v, const char* what) {
  if (!v.is_integer()) fail(std::string(what) + " must be an integer, not " + v.type_name());
  return v.i;
}

inline std::optional<std::string> opt_string(const Value& v, const char* what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  return need_string(v, what);
}

inline Value text_list(const std::vector<Text>& parts) {
  List l;
  for (const Text& t : parts) l.push_back(Value::string(t));
  return Value::new_list(std::move(l));
}

}  // namespace minfer::jinja::detail
