#include "chat/jinja/json.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja/ast.h"

namespace minfer::jinja {
namespace {

void string_json(const Text& t, bool ascii, Text& out) {
  out.append("\"");
  for (size_t k = 0; k < t.s.size(); ++k) {
    const char c = t.s[k];
    const auto u = static_cast<unsigned char>(c);
    std::string piece;
    switch (c) {
      case '"': piece = "\\\""; break;
      case '\\': piece = "\\\\"; break;
      case '\n': piece = "\\n"; break;
      case '\r': piece = "\\r"; break;
      case '\t': piece = "\\t"; break;
      case '\b': piece = "\\b"; break;
      case '\f': piece = "\\f"; break;
      default:
        if (u < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", u);
          piece = b;
        } else if (ascii && u >= 0x80) {
          // ensure_ascii: \uXXXX, a UTF-16 surrogate pair above U+FFFF (ill-formed bytes as U+FFFD)
          utf8proc_int32_t cp = -1;
          const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(t.s.data() + k),
                                          static_cast<utf8proc_ssize_t>(t.s.size() - k), &cp);
          char b[16];
          if (n <= 0) cp = 0xFFFD;
          if (cp >= 0x10000)
            std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800u + ((static_cast<unsigned>(cp) - 0x10000u) >> 10),
                          0xDC00u + ((static_cast<unsigned>(cp) - 0x10000u) & 0x3FFu));
          else
            std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
          out.append_tainted(b, t.tainted_at(k));
          if (n > 0) k += static_cast<size_t>(n) - 1;
          continue;
        } else {
          piece = std::string(1, c);
        }
    }
    out.append_tainted(piece, t.tainted_at(k));
  }
  out.append("\"");
}

// Past kMaxStringBytes the serialization stops (a value that holds itself twice per level doubles
// its text with every level: 30 levels are gigabytes).
void check_json_size(const Text& out) {
  if (out.s.size() > kMaxStringBytes) throw TemplateError("the JSON text is over " + string_bound());
}

void dump(const Value& v, const JsonOptions& o, int level, Text& out) {
  check_json_size(out);
  auto newline = [&](int lvl) {
    if (!o.indent) return;
    out.append("\n");
    for (int k = 0; k < lvl; ++k) out.append(*o.indent);
    check_json_size(out);
  };
  switch (v.kind) {
    case Value::Kind::none: out.append("null"); return;
    case Value::Kind::boolean: out.append(v.b ? "true" : "false"); return;
    case Value::Kind::integer: out.append(std::to_string(v.i)); return;
    case Value::Kind::floating:
      if (std::isnan(v.f)) out.append("NaN");
      else if (std::isinf(v.f)) out.append(v.f > 0 ? "Infinity" : "-Infinity");
      else out.append(python_float_repr(v.f));
      return;
    case Value::Kind::string: string_json(v.str, o.ensure_ascii, out); return;
    case Value::Kind::list: {
      if (v.list->empty()) {
        out.append("[]");
        return;
      }
      out.append("[");
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out.append(o.item_sep);
        newline(level + 1);
        dump((*v.list)[k], o, level + 1, out);
      }
      newline(level);
      out.append("]");
      return;
    }
    case Value::Kind::dict:
    case Value::Kind::ns: {
      if (v.dict->items.empty()) {
        out.append("{}");
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& it : v.dict->items) items.push_back(&it);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return less(a->first, b->first); });
      out.append("{");
      bool first = true;
      for (const auto* it : items) {
        if (!first) out.append(o.item_sep);
        first = false;
        newline(level + 1);
        const Value& key = it->first;
        if (key.is_string()) string_json(key.str, o.ensure_ascii, out);
        else if (key.is_none()) out.append("\"null\"");
        else if (key.kind == Value::Kind::boolean) out.append(key.b ? "\"true\"" : "\"false\"");
        else if (key.is_number()) string_json(key.to_text(), o.ensure_ascii, out);
        else throw TemplateError("keys must be str, int, float, bool or None, not " + key.type_name());
        out.append(o.key_sep);
        dump(it->second, o, level + 1, out);
      }
      newline(level);
      out.append("}");
      return;
    }
    case Value::Kind::undefined:
      throw TemplateError("Object of type Undefined is not JSON serializable ('" + v.undefined_name + "')");
    case Value::Kind::function: throw TemplateError("Object of type function is not JSON serializable");
  }
}

}  // namespace

Text to_json(const Value& v, const JsonOptions& opt) {
  Text out;
  dump(v, opt, 0, out);
  return out;
}

}  // namespace minfer::jinja
