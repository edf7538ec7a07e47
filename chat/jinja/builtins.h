// The built-in filters (filters.cpp), tests (tests.cpp), methods of Python values (methods.cpp)
// and global functions (globals.cpp) that templates call, with Jinja2 / Python semantics. Names
// not listed in builtins.cpp are unsupported: the parser rejects unknown filters and tests up
// front; an unknown method or global is an error when called.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/value.h"

namespace minfer::jinja {

/// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  int line = 0;

  /// Argument `pos` or keyword `name`, or `def` when neither is given.
  Value get(size_t pos, std::string_view name, Value def = Value::undefined()) const;
  bool has(size_t pos, std::string_view name) const;
};

bool has_filter(std::string_view name);
bool has_test(std::string_view name);

/// Applies filter `name` to `v` (args exclude v). Throws TemplateError.
Value apply_filter(Interpreter& in, std::string_view name, const Value& v, CallArgs& args);
/// Evaluates test `name` on `v`. Throws TemplateError.
bool apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& args);

/// The method `name` of `obj` bound to it (str.startswith, dict.items, ...), or undefined when
/// the type has no such method.
Value bound_method(const Value& obj, std::string_view name);

/// The global functions: range, namespace, dict, raise_exception, strftime_now.
Value global_function(std::string_view name);

}  // namespace minfer::jinja
