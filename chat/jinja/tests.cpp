// The built-in tests (`x is defined`, `x is string`, ...), with Jinja2's semantics (jinja2/tests.py).
#include <algorithm>
#include <cmath>

#include "chat/jinja/builtins_util.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/pystr.h"

namespace minfer::jinja {

using namespace detail;

bool apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& a) {
  using K = Value::Kind;
  auto arg = [&]() {
    if (a.args.empty()) fail("test '" + std::string(name) + "' needs an argument");
    return a.args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::boolean;
  if (name == "true") return v.kind == K::boolean && v.b;
  if (name == "false") return v.kind == K::boolean && !v.b;
  if (name == "integer") return v.kind == K::integer;
  if (name == "float") return v.kind == K::floating;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // Jinja2's default Undefined iterates as empty and has a length, so it passes both.
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "lower") return v.is_string() && pystr::islower(v.str);
  if (name == "upper") return v.is_string() && pystr::isupper(v.str);
  if (name == "even" || name == "odd") {
    if (v.kind == Value::Kind::floating) {  // Python's value % 2 (the divisor's sign): 3.0 is odd, 2.5 neither
      const double r = v.f - 2.0 * std::floor(v.f / 2.0);
      return r == (name == "even" ? 0.0 : 1.0);
    }
    const int64_t x = need_int(v, "the value");
    return (x % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    const int64_t d = need_int(arg(), "the divisor");
    if (d == 0) fail("integer division or modulo by zero");
    return need_int(v, "the value") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg());
  if (name == "ne" || name == "!=") return !equals(v, arg());
  if (name == "lt" || name == "<" || name == "lessthan") return less(v, arg());
  if (name == "gt" || name == ">" || name == "greaterthan") return less(arg(), v);
  if (name == "le" || name == "<=") return !less(arg(), v);
  if (name == "ge" || name == ">=") return !less(v, arg());
  if (name == "sameas") {
    const Value o = arg();
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case K::none:
      case K::undefined: return v.kind == K::none;
      case K::boolean: return v.b == o.b;
      case K::list: return v.list == o.list;
      case K::dict:
      case K::ns: return v.dict == o.dict;
      case K::function: return v.fn == o.fn;
      default: return equals(v, o);  // small ints and interned strings are identical in CPython
    }
  }
  if (name == "in") {
    const Value c = arg();
    if (c.is_string()) return v.is_string() && c.str.s.find(v.str.s) != std::string::npos;
    if (c.is_list()) return std::any_of(c.list->begin(), c.list->end(), [&](const Value& x) { return equals(x, v); });
    if (c.is_dict()) return c.dict->find(v) != nullptr;
    fail("test 'in' needs a container");
  }
  if (name == "filter") return v.is_string() && has_filter(v.str.s);
  if (name == "test") return v.is_string() && has_test(v.str.s);
  (void)in;
  fail("unsupported test '" + std::string(name) + "'");
}

}  // namespace minfer::jinja
