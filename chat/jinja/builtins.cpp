// Call arguments and the tables of supported filter and test names.
#include "chat/jinja/builtins.h"

#include <set>

namespace minfer::jinja {

Value CallArgs::get(size_t pos, std::string_view name, Value def) const {
  if (pos < args.size()) return args[pos];
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return def;
}

bool CallArgs::has(size_t pos, std::string_view name) const {
  if (pos < args.size()) return true;
  for (const auto& [k, v] : kwargs)
    if (k == name) return true;
  return false;
}

namespace {

const std::set<std::string_view>& filter_names() {
  static const std::set<std::string_view> names = {
      "abs",   "attr",   "capitalize", "count",  "d",      "default", "dictsort", "first",   "float", "indent",
      "int",   "items",  "join",       "last",   "length", "list",    "lower",    "map",     "max",   "min",
      "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort", "string",
      "sum",   "title",  "tojson",     "trim",   "unique", "upper",   "wordcount"};
  return names;
}

const std::set<std::string_view>& test_names() {
  static const std::set<std::string_view> names = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "even", "false", "filter",
      "float", "ge", ">=", "gt", ">", "greaterthan", "in", "integer", "iterable", "le", "<=", "lower", "lt", "<",
      "lessthan", "mapping", "ne", "!=", "none", "number", "odd", "sameas", "sequence", "string", "test", "true",
      "undefined", "upper"};
  return names;
}

}  // namespace

bool has_filter(std::string_view name) { return filter_names().count(name) > 0; }
bool has_test(std::string_view name) { return test_names().count(name) > 0; }

}  // namespace minfer::jinja
