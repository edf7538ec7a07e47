// The `tojson` filter as Hugging Face defines it for chat templates: Python's
// json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
// sort_keys=sort_keys), with HF's tojson(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False) — not Jinja2's HTML-escaping tojson.
#pragma once

#include <optional>
#include <string>

#include "chat/jinja/value.h"

namespace minfer::jinja {

struct JsonOptions {
  std::optional<std::string> indent;  ///< absent: one line; an int n becomes n spaces
  std::string item_sep = ", ";        ///< json.dumps default (", " without indent, "," with)
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;          ///< non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
};

/// Serializes `v`; string bytes keep their taint (escapes of tainted characters are tainted).
/// Throws TemplateError for values JSON cannot hold (undefined, functions).
Text to_json(const Value& v, const JsonOptions& opt = {});

}  // namespace minfer::jinja
