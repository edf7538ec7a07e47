// Methods of Python values that templates call: str (startswith, split, strip, ...), dict
// (get, items, keys, values) and list (index, count). Mutating methods are refused, as in HF's
// immutable sandbox.
#include <algorithm>
#include <cctype>
#include <set>

#include "chat/jinja/builtins_util.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/pystr.h"

namespace minfer::jinja {

using namespace detail;

namespace {

Value method(Value self, Function f) {
  (void)self;
  return Value::function(std::move(f));
}

// The part of `self` that str.find / count / startswith / ... search given their optional start
// and end (arguments `at` and `at + 1`, None allowed), as Python adjusts them: negatives count
// from the end, end is clamped to the length, and a start past the end leaves nothing to search
// — not even the empty string (nullopt). The second value is the start in code points.
std::optional<std::pair<Text, int64_t>> search_range(const Value& self, CallArgs& a, size_t at) {
  const Value sv = a.get(at, "start"), ev = a.get(at + 1, "end");
  const auto n = static_cast<int64_t>(pystr::length(self.str));
  auto index = [&](const Value& v, int64_t none, const char* what) {
    if (v.is_undefined() || v.is_none()) return none;
    const int64_t i = need_int(v, what);
    return i < 0 ? std::max<int64_t>(0, i + n) : i;
  };
  const int64_t start = index(sv, 0, "start"), end = std::min(n, index(ev, n, "end"));
  if (start > end) return std::nullopt;
  return std::make_pair(pystr::span(self.str, static_cast<size_t>(start), static_cast<size_t>(end)), start);
}

bool prefix_match(const Value& self, CallArgs& a, bool suffix) {
  const Value arg = a.get(0, "prefix");
  const auto r = search_range(self, a, 1);
  auto one = [&](const Value& p) {
    const std::string s = need_string(p, suffix ? "endswith's argument" : "startswith's argument");
    return r && (suffix ? r->first.s.ends_with(s) : r->first.s.starts_with(s));
  };
  if (arg.is_list()) return std::any_of(arg.list->begin(), arg.list->end(), one);
  return one(arg);
}

Value string_method(const Value& self, std::string_view name) {
  const std::string n(name);
  if (n == "startswith" || n == "endswith")
    return method(self, [self, n](Interpreter&, CallArgs& a) { return Value::boolean(prefix_match(self, a, n == "endswith")); });
  if (n == "strip" || n == "lstrip" || n == "rstrip")
    return method(self, [self, n](Interpreter&, CallArgs& a) {
      return Value::string(pystr::strip(self.str, opt_string(a.get(0, "chars"), "chars"), n != "rstrip", n != "lstrip"));
    });
  if (n == "split" || n == "rsplit")
    return method(self, [self, n](Interpreter&, CallArgs& a) {
      const Value mx = a.get(1, "maxsplit", Value::integer(-1));
      return text_list(pystr::split(self.str, opt_string(a.get(0, "sep"), "sep"), need_int(mx, "maxsplit"), n == "rsplit"));
    });
  if (n == "splitlines")
    return method(self, [self](Interpreter&, CallArgs& a) {
      return text_list(pystr::splitlines(self.str, a.get(0, "keepends", Value::boolean(false)).truthy()));
    });
  if (n == "upper") return method(self, [self](Interpreter&, CallArgs&) { return Value::string(pystr::upper(self.str)); });
  if (n == "lower") return method(self, [self](Interpreter&, CallArgs&) { return Value::string(pystr::lower(self.str)); });
  if (n == "title") return method(self, [self](Interpreter&, CallArgs&) { return Value::string(pystr::title(self.str)); });
  if (n == "capitalize") return method(self, [self](Interpreter&, CallArgs&) { return Value::string(pystr::capitalize(self.str)); });
  if (n == "replace")
    return method(self, [self](Interpreter&, CallArgs& a) {
      const Value cnt = a.get(2, "count", Value::integer(-1));
      return Value::string(pystr::replace(self.str, need_string(a.get(0, "old"), "old"), a.get(1, "new").to_text(), need_int(cnt, "count")));
    });
  if (n == "find" || n == "rfind" || n == "index" || n == "rindex")
    return method(self, [self, n](Interpreter&, CallArgs& a) {
      const std::string sub = need_string(a.get(0, "sub"), "sub");
      const auto r = search_range(self, a, 1);
      const int64_t at = r ? pystr::find(r->first, sub, n[0] == 'r') : -1;
      if (at < 0 && (n == "index" || n == "rindex")) fail("substring not found");
      return Value::integer(at < 0 ? -1 : at + r->second);
    });
  if (n == "count")
    return method(self, [self](Interpreter&, CallArgs& a) {
      const std::string sub = need_string(a.get(0, "sub"), "sub");
      const auto r = search_range(self, a, 1);
      return Value::integer(r ? pystr::count(r->first, sub) : 0);
    });
  if (n == "join")
    return method(self, [self](Interpreter& in, CallArgs& a) {
      Text out;
      bool first = true;
      for (const Value& x : in.iterate(a.get(0, "iterable"), a.line)) {
        if (!first) out.append(self.str);
        first = false;
        if (!x.is_string()) fail("sequence item: expected str instance, " + x.type_name() + " found");
        out.append(x.str);
      }
      return Value::string(std::move(out));
    });
  if (n == "removeprefix" || n == "removesuffix")
    return method(self, [self, n](Interpreter&, CallArgs& a) {
      const std::string p = need_string(a.get(0, "prefix"), "affix");
      if (n == "removeprefix" && self.str.s.starts_with(p)) return Value::string(self.str.substr(p.size()));
      if (n == "removesuffix" && !p.empty() && self.str.s.ends_with(p))
        return Value::string(self.str.substr(0, self.str.s.size() - p.size()));
      return self;
    });
  if (n == "isspace") return method(self, [self](Interpreter&, CallArgs&) { return Value::boolean(pystr::isspace(self.str)); });
  if (n == "isdigit" || n == "isalpha" || n == "isalnum" || n == "isupper" || n == "islower")
    return method(self, [self, n](Interpreter&, CallArgs&) {
      const Text& t = self.str;
      if (n == "isupper") return Value::boolean(pystr::isupper(t));
      if (n == "islower") return Value::boolean(pystr::islower(t));
      return Value::boolean(n == "isdigit" ? pystr::isdigit(t) : n == "isalpha" ? pystr::isalpha(t) : pystr::isalnum(t));
    });
  return Value::undefined(n);
}

}  // namespace

Value bound_method(const Value& obj, std::string_view name) {
  static const std::set<std::string_view> mutators = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
                                                       "reverse", "update", "setdefault", "popitem"};
  if ((obj.is_list() || obj.is_dict()) && mutators.count(name)) {
    const std::string n(name);
    return Value::function([n](Interpreter&, CallArgs&) -> Value {
      fail("unsupported: ." + n + "() (templates cannot modify lists or dicts, as in Hugging Face's sandbox)");
    });
  }
  if (obj.is_string()) return string_method(obj, name);
  if (obj.is_dict()) {
    const Value self = obj;
    if (name == "items")
      return method(self, [self](Interpreter& in, CallArgs& a) { return apply_filter(in, "items", self, a); });
    if (name == "keys")
      return method(self, [self](Interpreter& in, CallArgs& a) { return Value::new_list(in.iterate(self, a.line)); });
    if (name == "values")
      return method(self, [self](Interpreter&, CallArgs&) {
        List out;
        for (const auto& [k, v] : self.dict->items) out.push_back(v);
        return Value::new_list(std::move(out));
      });
    if (name == "get")
      return method(self, [self](Interpreter&, CallArgs& a) {
        const Value* v = self.dict->find(a.get(0, "key"));
        return v ? *v : a.get(1, "default", Value::none());
      });
  }
  if (obj.is_list()) {
    const Value self = obj;
    if (name == "index")
      return method(self, [self](Interpreter&, CallArgs& a) {
        const Value x = a.get(0, "value");
        for (size_t k = 0; k < self.list->size(); ++k)
          if (equals((*self.list)[k], x)) return Value::integer(static_cast<int64_t>(k));
        fail(x.repr().s + " is not in list");
      });
    if (name == "count")
      return method(self, [self](Interpreter&, CallArgs& a) {
        const Value x = a.get(0, "value");
        return Value::integer(std::count_if(self.list->begin(), self.list->end(), [&](const Value& y) { return equals(x, y); }));
      });
  }
  return Value::undefined(std::string(name));
}

}  // namespace minfer::jinja
