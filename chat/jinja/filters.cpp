// The built-in filters, with Jinja2's semantics (jinja2/filters.py) and HF's tojson.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "chat/jinja/ast.h"
#include "chat/jinja/builtins_util.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/json.h"
#include "chat/jinja/pynum.h"
#include "chat/jinja/pystr.h"

namespace minfer::jinja {

using namespace detail;

namespace {

// Jinja2's sort key: strings compare case-insensitively unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(pystr::lower(v.str));
  return v;
}

// Attribute lookup for filters' `attribute=` ("a.b" and integer parts allowed, as in Jinja2).
Value attribute_of(Interpreter& in, const Value& v, const std::string& path, int line) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = numeric ? in.getitem(cur, Value::integer(std::stoll(part)), line) : in.getitem(cur, Value::string(Text(part)), line);
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// A filter's `attribute=` argument as a path: a string, or an integer index (Jinja2 takes both).
std::string attr_path(const Value& v, const char* what) {
  if (v.is_integer()) return std::to_string(v.i);
  return need_string(v, what);
}

CallArgs rest_args(const CallArgs& a, size_t from) {
  CallArgs r;
  r.line = a.line;
  for (size_t k = from; k < a.args.size(); ++k) r.args.push_back(a.args[k]);
  r.kwargs = a.kwargs;
  return r;
}

List select_or_reject(Interpreter& in, const Value& seq, CallArgs& a, bool attr, bool select) {
  List out;
  std::string attr_name;
  size_t test_pos = 0;
  if (attr) {
    attr_name = attr_path(a.get(0, "attribute"), "the attribute name");
    test_pos = 1;
  }
  const bool with_test = a.args.size() > test_pos;
  const std::string test_name = with_test ? need_string(a.args[test_pos], "the test name") : std::string();
  if (with_test && !has_test(test_name)) fail("unsupported test '" + test_name + "'");
  CallArgs targs = rest_args(a, test_pos + 1);
  targs.kwargs.clear();
  for (const Value& item : in.iterate(seq, a.line)) {
    const Value x = attr ? attribute_of(in, item, attr_name, a.line) : item;
    const bool ok = with_test ? apply_test(in, test_name, x, targs) : x.truthy();
    if (ok == select) out.push_back(item);
  }
  return out;
}

}  // namespace

Value apply_filter(Interpreter& in, std::string_view name, const Value& v, CallArgs& a) {
  const int line = a.line;
  if (name == "safe") return v;
  if (name == "string") return Value::string(v.to_text());
  if (name == "trim") return Value::string(pystr::strip(v.to_text(), opt_string(a.get(0, "chars"), "trim chars"), true, true));
  if (name == "upper") return Value::string(pystr::upper(v.to_text()));
  if (name == "lower") return Value::string(pystr::lower(v.to_text()));
  if (name == "title") {
    // Jinja2's do_title: the text split at runs of whitespace, '-', '(', '{', '[' and '<'; each
    // word's first character uppercased and the rest of it lowercased as one string (not
    // Python's str.title, and a final sigma is final within the word's rest).
    const Text t = v.to_text();
    const auto cs = pystr::chars(t);
    auto is_sep = [](const Text& c) {
      return c.s == "-" || c.s == "(" || c.s == "{" || c.s == "[" || c.s == "<" || pystr::isspace(c);
    };
    Text out;
    for (size_t i = 0; i < cs.size();) {
      size_t j = i + 1;
      if (is_sep(cs[i])) {
        out.append(cs[i]);
      } else {
        out.append(pystr::upper(cs[i]));
        Text rest;
        for (; j < cs.size() && !is_sep(cs[j]); ++j) rest.append(cs[j]);
        out.append(pystr::lower(rest));
      }
      i = j;
    }
    return Value::string(std::move(out));
  }
  if (name == "capitalize") return Value::string(pystr::capitalize(v.to_text()));
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value::integer(0);
    if (v.is_string()) return Value::integer(static_cast<int64_t>(pystr::length(v.str)));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.dict->items.size()));
    fail("object of type '" + v.type_name() + "' has no len()");
  }
  if (name == "default" || name == "d") {
    const bool boolean = a.get(1, "boolean", Value::boolean(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value::string(Text("")));
    return v;
  }
  if (name == "tojson") {
    JsonOptions o;
    // HF's signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    o.ensure_ascii = a.get(0, "ensure_ascii", Value::boolean(false)).truthy();
    const Value indent = a.get(1, "indent", Value::none());
    if (indent.is_integer() && indent.i > static_cast<int64_t>(kMaxStringBytes)) fail("indent is over " + string_bound());
    if (indent.is_integer()) o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.i)), ' ');
    else if (indent.is_string()) o.indent = indent.str.s;
    else if (!indent.is_none()) fail("indent must be an integer or a string");
    if (o.indent) o.item_sep = ",";
    const Value seps = a.get(2, "separators", Value::none());
    if (seps.is_list() && seps.list->size() == 2) {
      o.item_sep = need_string((*seps.list)[0], "separators[0]");
      o.key_sep = need_string((*seps.list)[1], "separators[1]");
    } else if (!seps.is_none()) {
      fail("separators must be a pair of strings");
    }
    o.sort_keys = a.get(3, "sort_keys", Value::boolean(false)).truthy();
    return Value::string(to_json(v, o));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::new_list();
    if (!v.is_dict()) fail("items() needs a mapping, got " + v.type_name());
    List out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::new_list({k, x}, true));
    return Value::new_list(std::move(out));
  }
  if (name == "list") return Value::new_list(in.iterate(v, line));
  if (name == "first" || name == "last") {
    const List items = in.iterate(v, line);
    if (items.empty()) return Value::undefined(std::string("the ") + std::string(name) + " item of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const Text sep = a.get(0, "d", Value::string(Text(""))).to_text();
    const Value attr = a.get(1, "attribute", Value::none());
    Text out;
    bool first = true;
    for (const Value& x : in.iterate(v, line)) {
      if (!first) out.append(sep);
      first = false;
      out.append((attr.is_none() ? x : attribute_of(in, x, attr_path(attr, "attribute"), line)).to_text());
      Interpreter::check_size(out, line);
    }
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    const std::string old = a.get(0, "old").to_text().s;
    const Text repl = a.get(1, "new").to_text();
    const Value cnt = a.get(2, "count", Value::none());
    return Value::string(pystr::replace(v.to_text(), old, repl, cnt.is_none() ? -1 : need_int(cnt, "count")));
  }
  if (name == "indent") {
    const Value w = a.get(0, "width", Value::integer(4));
    if (!w.is_string() && need_int(w, "width") > static_cast<int64_t>(kMaxStringBytes)) fail("width is over " + string_bound());
    const std::string ind = w.is_string() ? w.str.s : std::string(static_cast<size_t>(std::max<int64_t>(0, w.i)), ' ');
    const bool first = a.get(1, "first", Value::boolean(false)).truthy();
    const bool blank = a.get(2, "blank", Value::boolean(false)).truthy();
    Text s = v.to_text();
    s.append("\n");  // Jinja2's own quirk, so that splitlines sees a final line
    // Each line gets the indent: refused when `n` lines would pass the bound — first with the
    // '\n' count, before the lines are built, then with splitlines' count (it splits at other
    // line breaks too).
    const auto check_lines = [&](size_t n) {
      if (n > kMaxListItems || s.s.size() + n * ind.size() > kMaxStringBytes)
        fail("the indented text would be over " + string_bound());
    };
    check_lines(static_cast<size_t>(std::count(s.s.begin(), s.s.end(), '\n')));
    const std::vector<Text> lines = pystr::splitlines(s);
    check_lines(lines.size());
    Text rv;
    if (blank) {
      for (size_t k = 0; k < lines.size(); ++k) {
        if (k) rv.append("\n" + ind);
        rv.append(lines[k]);
      }
    } else if (!lines.empty()) {
      rv = lines[0];
      for (size_t k = 1; k < lines.size(); ++k) {
        rv.append("\n");
        if (!lines[k].s.empty()) rv.append(ind);
        rv.append(lines[k]);
      }
    }
    if (first) {
      Text t(ind);
      t.append(rv);
      rv = std::move(t);
    }
    return Value::string(std::move(rv));
  }
  if (name == "int") {  // int(value, base), else int(float(value)), else the default
    const Value def = a.get(0, "default", Value::integer(0));
    const auto from_double = [&](double d) {
      if (std::isnan(d)) fail("cannot convert float NaN to integer");
      if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) fail("integer out of range: " + Value::floating(d).to_text().s);
      return Value::integer(static_cast<int64_t>(d));
    };
    if (v.is_integer()) return Value::integer(v.i);
    if (v.kind == Value::Kind::floating) return from_double(v.f);
    if (v.is_string()) {
      const auto r = pynum::parse_int(v.str.s, static_cast<int>(need_int(a.get(1, "base", Value::integer(10)), "base")));
      if (r.status == pynum::IntParse::ok) return Value::integer(r.value);
      if (r.status == pynum::IntParse::overflow) fail("integer out of range: " + v.str.s);
      if (const auto d = pynum::parse_float(v.str.s)) return from_double(*d);
    }
    return def;
  }
  if (name == "float") {
    const Value def = a.get(0, "default", Value::floating(0));
    if (v.is_number()) return Value::floating(v.as_double());
    if (v.is_string())
      if (const auto d = pynum::parse_float(v.str.s)) return Value::floating(*d);
    return def;
  }
  if (name == "abs") {
    if (v.kind == Value::Kind::floating) return Value::floating(std::fabs(v.f));
    if (v.is_integer()) return Value::integer(v.i < 0 ? -v.i : v.i);
    fail("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "round") {
    const int64_t prec = need_int(a.get(0, "precision", Value::integer(0)), "precision");
    const std::string method = a.get(1, "method", Value::string(Text("common"))).to_text().s;
    if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
    if (method == "common") {  // round(value, precision): an int stays an int
      if (v.is_integer()) {
        if (const auto r = pynum::round_int(v.i, prec)) return Value::integer(*r);
        fail("integer out of range in round()");
      }
      return Value::floating(pynum::round_float(v.as_double(), prec));
    }
    // math.ceil / math.floor(value * 10**precision) / 10**precision
    const double m = std::pow(10.0, static_cast<double>(prec));
    const double x = v.as_double() * m;
    return Value::floating((method == "ceil" ? std::ceil(x) : std::floor(x)) / m);
  }
  if (name == "attr") {  // Python getattr only: a dict's keys are not attributes
    const std::string n = need_string(a.get(0, "name"), "attribute name");
    if (v.is_dict()) return bound_method(v, n);
    return in.getattr(v, n, line);
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cs = pystr::chars(v.str);
      Text out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out.append(*it);
      return Value::string(std::move(out));
    }
    List items = in.iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::new_list(std::move(items));
  }
  if (name == "select" || name == "reject")
    return Value::new_list(select_or_reject(in, v, a, false, name == "select"));
  if (name == "selectattr" || name == "rejectattr")
    return Value::new_list(select_or_reject(in, v, a, true, name == "selectattr"));
  if (name == "map") {
    List out;
    const Value attr = a.get(99, "attribute", Value::undefined());
    if (!attr.is_undefined()) {
      const Value def = a.get(99, "default", Value::undefined());
      for (const Value& x : in.iterate(v, line)) {
        Value r = attribute_of(in, x, attr_path(attr, "attribute"), line);
        out.push_back(r.is_undefined() && !def.is_undefined() ? def : r);
      }
      return Value::new_list(std::move(out));
    }
    if (a.args.empty()) fail("map needs a filter name or attribute=");
    const std::string f = need_string(a.args[0], "the filter name");
    if (!has_filter(f)) fail("unsupported filter '" + f + "'");
    CallArgs fa = rest_args(a, 1);
    for (const Value& x : in.iterate(v, line)) out.push_back(apply_filter(in, f, x, fa));
    return Value::new_list(std::move(out));
  }
  if (name == "sort" || name == "unique" || name == "max" || name == "min") {
    const bool reverse = name == "sort" && a.get(0, "reverse", Value::boolean(false)).truthy();
    const bool cs = a.get(name == "sort" ? 1 : 0, "case_sensitive", Value::boolean(false)).truthy();
    const Value attr = a.get(name == "sort" ? 2 : 1, "attribute", Value::none());
    List items = in.iterate(v, line);
    // sort takes several comma-separated attributes (Jinja2's make_multi_attrgetter): the key is
    // the list of their values.
    const std::string path = attr.is_none() ? std::string() : attr_path(attr, "attribute");
    const std::vector<Text> paths = name == "sort" && path.find(',') != std::string::npos
                                        ? pystr::split(Text(path), std::string(","), -1)
                                        : std::vector<Text>{};
    auto key = [&](const Value& x) {
      if (attr.is_none()) return sort_key(x, cs);
      if (paths.empty()) return sort_key(attribute_of(in, x, path, line), cs);
      List k;
      for (const Text& p : paths) k.push_back(sort_key(attribute_of(in, x, p.s, line), cs));
      return Value::new_list(std::move(k));
    };
    if (name == "unique") {
      List out, seen;
      for (const Value& x : items) {
        const Value k = key(x);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
          seen.push_back(k);
          out.push_back(x);
        }
      }
      return Value::new_list(std::move(out));
    }
    if (name == "max" || name == "min") {
      if (items.empty()) return Value::undefined("max/min of an empty sequence");
      size_t best = 0;
      for (size_t k = 1; k < items.size(); ++k) {
        const bool better = name == "max" ? less(key(items[best]), key(items[k])) : less(key(items[k]), key(items[best]));
        if (better) best = k;
      }
      return items[best];
    }
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return reverse ? less(key(y), key(x)) : less(key(x), key(y));
    });
    return Value::new_list(std::move(items));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort needs a mapping");
    const bool cs = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
    const std::string by = a.get(1, "by", Value::string(Text("key"))).to_text().s;
    const bool reverse = a.get(2, "reverse", Value::boolean(false)).truthy();
    List items;
    for (const auto& [k, x] : v.dict->items) items.push_back(Value::new_list({k, x}, true));
    const size_t idx = by == "value" ? 1 : 0;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value kx = sort_key((*x.list)[idx], cs), ky = sort_key((*y.list)[idx], cs);
      return reverse ? less(ky, kx) : less(kx, ky);
    });
    return Value::new_list(std::move(items));
  }
  if (name == "sum") {
    const Value attr = a.get(0, "attribute", Value::none());
    Value total = a.get(1, "start", Value::integer(0));
    for (const Value& x : in.iterate(v, line)) {
      const Value y = attr.is_none() ? x : attribute_of(in, x, attr_path(attr, "attribute"), line);
      if (!y.is_number() || !total.is_number()) fail("sum needs numbers");
      total = total.is_integer() && y.is_integer() ? Value::integer(total.i + y.i) : Value::floating(total.as_double() + y.as_double());
    }
    return total;
  }
  if (name == "wordcount") return Value::integer(pystr::word_runs(v.to_text()));
  fail("unsupported filter '" + std::string(name) + "'");
}

}  // namespace minfer::jinja
