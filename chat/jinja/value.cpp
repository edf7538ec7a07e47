#include "chat/jinja/value.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace minfer::jinja {

Text Text::of(std::string str, bool tainted) {
  Text t(std::move(str));
  if (tainted && !t.s.empty()) t.taint.assign(t.s.size(), 1);
  return t;
}

bool Text::any_tainted() const {
  for (uint8_t x : taint)
    if (x) return true;
  return false;
}

void Text::append(const Text& o) {
  if (o.taint.empty()) return append(std::string_view(o.s));
  taint.resize(s.size(), 0);  // materialize this side's (clean) mask first
  s += o.s;
  taint.insert(taint.end(), o.taint.begin(), o.taint.end());
}

void Text::append(std::string_view clean) {
  s += clean;
  if (!taint.empty()) taint.resize(s.size(), 0);
}

void Text::append_tainted(std::string_view str, bool tainted) {
  if (!tainted) return append(str);
  taint.resize(s.size(), 0);
  s += str;
  taint.resize(s.size(), 1);
}

Text Text::substr(size_t pos, size_t n) const {
  Text t(s.substr(pos, n));
  if (!taint.empty()) t.taint.assign(taint.begin() + static_cast<std::ptrdiff_t>(pos),
                                     taint.begin() + static_cast<std::ptrdiff_t>(pos + t.s.size()));
  return t;
}

Value Value::undefined(std::string name) {
  Value v;
  v.undefined_name = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::none;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::boolean;
  v.b = x;
  v.i = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::integer;
  v.i = x;
  return v;
}
Value Value::floating(double x) {
  Value v;
  v.kind = Kind::floating;
  v.f = x;
  return v;
}
Value Value::string(Text t) {
  Value v;
  v.kind = Kind::string;
  v.str = std::move(t);
  return v;
}
Value Value::new_list(List items, bool tuple) {
  Value v;
  v.kind = Kind::list;
  v.list = std::make_shared<List>(std::move(items));
  v.is_tuple = tuple;
  return v;
}
Value Value::new_dict() {
  Value v;
  v.kind = Kind::dict;
  v.dict = std::make_shared<Dict>();
  return v;
}
Value Value::new_namespace() {
  Value v = new_dict();
  v.kind = Kind::ns;
  return v;
}
Value Value::function(Function f) {
  Value v;
  v.kind = Kind::function;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

Value tainted_string(std::string s) { return Value::string(Text::of(std::move(s), true)); }

bool Value::truthy() const {
  switch (kind) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return b;
    case Kind::integer: return i != 0;
    case Kind::floating: return f != 0;
    case Kind::string: return !str.s.empty();
    case Kind::list: return !list->empty();
    case Kind::dict: return !dict->items.empty();
    case Kind::function:
    case Kind::ns: return true;
  }
  return false;
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: exponent form when the decimal exponent
  // is < -4 or >= 16 (float_repr_style 'short', format code 'r').
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp < -4 || exp >= 16) {
    std::string m = digits.substr(0, 1);
    if (digits.size() > 1) m += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return sign + m + eb;
  }
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
  }
  return sign + out;
}

namespace {

// Python's repr of a str: single quotes unless the text has ' and no ".
Text repr_string(const Text& t) {
  const bool has_single = t.s.find('\'') != std::string::npos;
  const bool has_double = t.s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  Text out(std::string(1, q));
  for (size_t k = 0; k < t.s.size(); ++k) {
    const char c = t.s[k];
    const auto u = static_cast<unsigned char>(c);
    std::string piece;
    if (c == q || c == '\\') piece = std::string("\\") + c;
    else if (c == '\n') piece = "\\n";
    else if (c == '\r') piece = "\\r";
    else if (c == '\t') piece = "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      piece = b;
    } else if (u >= 0x80) {
      // A character str.isprintable() rejects (controls, format characters, separators other
      // than the space, unassigned and private-use code points) is escaped as Python does.
      utf8proc_int32_t cp = -1;
      const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(t.s.data() + k),
                                      static_cast<utf8proc_ssize_t>(t.s.size() - k), &cp);
      if (n <= 0) {  // ill-formed bytes: kept as they are
        piece = std::string(1, c);
      } else {
        switch (utf8proc_category(cp)) {
          case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
          case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS: {
            char b[16];
            std::snprintf(b, sizeof b, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", static_cast<unsigned>(cp));
            piece = b;
            break;
          }
          default: piece = t.s.substr(k, static_cast<size_t>(n));
        }
        out.append_tainted(piece, t.tainted_at(k));
        k += static_cast<size_t>(n) - 1;
        continue;
      }
    } else piece = std::string(1, c);
    out.append_tainted(piece, t.tainted_at(k));
  }
  out.append(std::string(1, q));
  return out;
}

}  // namespace

Text Value::repr() const {
  if (kind == Kind::string) return repr_string(str);
  if (kind == Kind::list) {
    Text out(is_tuple ? "(" : "[");
    for (size_t k = 0; k < list->size(); ++k) {
      if (k) out.append(", ");
      out.append((*list)[k].repr());
    }
    if (is_tuple && list->size() == 1) out.append(",");
    out.append(is_tuple ? ")" : "]");
    return out;
  }
  if (kind == Kind::dict) {
    Text out("{");
    bool first = true;
    for (const auto& [k, v] : dict->items) {
      if (!first) out.append(", ");
      first = false;
      out.append(k.repr());
      out.append(": ");
      out.append(v.repr());
    }
    out.append("}");
    return out;
  }
  if (kind == Kind::undefined) return Text("");
  return to_text();
}

Text Value::to_text() const {
  switch (kind) {
    case Kind::undefined: return Text("");
    case Kind::none: return Text("None");
    case Kind::boolean: return Text(b ? "True" : "False");
    case Kind::integer: return Text(std::to_string(i));
    case Kind::floating: return Text(python_float_repr(f));
    case Kind::string: return str;
    case Kind::list:
    case Kind::dict: return repr();
    case Kind::function: return Text("<function>");
    case Kind::ns: return Text("<Namespace>");
  }
  return Text("");
}

double Value::as_double() const {
  if (kind == Kind::integer || kind == Kind::boolean) return static_cast<double>(i);
  if (kind == Kind::floating) return f;
  throw TemplateError("expected a number, got " + type_name());
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::undefined: return "undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list: return is_tuple ? "tuple" : "list";
    case Kind::dict: return "dict";
    case Kind::function: return "function";
    case Kind::ns: return "Namespace";
  }
  return "?";
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.kind == Value::Kind::string && k.str.s == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value v) {
  for (auto& [k, old] : items) {
    if (equals(k, key)) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.i == b.i;
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::undefined:
    case K::none: return true;
    case K::string: return a.str.s == b.str.s;
    case K::list:
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;  // Python: (1, 2) != [1, 2]
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case K::dict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    case K::function: return a.fn == b.fn;
    case K::ns: return a.dict == b.dict;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.i < b.i;
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str.s < b.str.s;  // UTF-8 byte order = code point order
  if (a.is_list() && b.is_list()) {
    const size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (!equals((*a.list)[k], (*b.list)[k])) return less((*a.list)[k], (*b.list)[k]);
    }
    return a.list->size() < b.list->size();
  }
  throw TemplateError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace minfer::jinja
