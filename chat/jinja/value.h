// Values of the Jinja interpreter, with Python semantics (Jinja2 runs on Python objects, and chat
// templates are written against them): undefined, none, bool, int, float, string, list (and
// tuple), dict (insertion-ordered), callable (macros, methods, globals) and namespace.
//
// Strings carry a per-byte *taint* mask: bytes that came from the caller's data (message
// content, roles, tool definitions) are tainted, bytes written by the template are not. Every
// string operation (concatenation, slicing, trim, replace, split, tojson, ...) carries the mask
// along, so after rendering the output knows which bytes the template wrote. chat/tokenize_chat.h
// uses it to match special tokens only in template text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::jinja {

/// Any error of parsing or rendering a template. The message names the construct and, where
/// known, the template line ("chat template line 12: unknown filter 'xmlattr'").
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A string with its taint mask. `taint` is empty when no byte is tainted; otherwise it has one
/// entry per byte of `s` (1: the byte came from caller data).
struct Text {
  std::string s;
  std::vector<uint8_t> taint;

  Text() = default;
  Text(std::string str) : s(std::move(str)) {}  // NOLINT: clean template text converts implicitly
  Text(const char* str) : s(str) {}             // NOLINT
  /// A string whose every byte is tainted (or clean when `tainted` is false).
  static Text of(std::string str, bool tainted);

  bool tainted_at(size_t i) const { return !taint.empty() && taint[i] != 0; }
  bool any_tainted() const;
  void append(const Text& o);
  void append(std::string_view clean);
  void append(const std::string& clean) { append(std::string_view(clean)); }
  void append(const char* clean) { append(std::string_view(clean)); }
  void append_tainted(std::string_view str, bool tainted);
  /// Bytes [pos, pos + n) with their mask.
  Text substr(size_t pos, size_t n = std::string::npos) const;
};

struct Value;
using List = std::vector<Value>;
class Dict;
class Interpreter;
struct CallArgs;
/// A callable: macros, bound methods, global functions.
using Function = std::function<Value(Interpreter&, CallArgs&)>;

struct Value {
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, function, ns };

  Kind kind = Kind::undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  Text str;
  std::shared_ptr<List> list;  ///< list and tuple elements (shared: Python reference semantics)
  std::shared_ptr<Dict> dict;  ///< dict items and namespace attributes
  std::shared_ptr<Function> fn;
  bool is_tuple = false;
  std::string undefined_name;  ///< for messages: what was undefined

  Value() = default;
  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(Text t);
  static Value new_list(List items = {}, bool tuple = false);
  static Value new_dict();
  static Value new_namespace();
  static Value function(Function f);

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_none() const { return kind == Kind::none; }
  bool is_string() const { return kind == Kind::string; }
  bool is_list() const { return kind == Kind::list; }
  bool is_dict() const { return kind == Kind::dict; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::floating || kind == Kind::boolean; }
  bool is_integer() const { return kind == Kind::integer || kind == Kind::boolean; }
  bool is_callable() const { return kind == Kind::function; }

  /// Python truthiness.
  bool truthy() const;
  /// Jinja2 `{{ v }}` / Python str(v): "None", "True", repr of floats, lists and dicts as Python
  /// prints them; undefined renders as "". Taint carries through.
  Text to_text() const;
  /// Python repr(v) (strings quoted).
  Text repr() const;
  double as_double() const;  ///< int/float/bool; TemplateError otherwise
  /// Python's name of the type, for error messages ("str", "int", "list", ...).
  std::string type_name() const;
};

/// Insertion-ordered dict (Python 3.7+ semantics). Keys are Values compared with Python `==`.
class Dict {
 public:
  std::vector<std::pair<Value, Value>> items;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value v);
  void set(std::string_view key, Value v) { set(Value::string(Text(std::string(key))), std::move(v)); }
};

/// Python ==.
bool equals(const Value& a, const Value& b);
/// Python <; TemplateError for types that do not order.
bool less(const Value& a, const Value& b);

/// Python's repr of a float ("1.0", "0.1", "1e-05", "1e+16", "inf", "nan").
std::string python_float_repr(double v);

/// Builds a Value from plain data, every string tainted (the caller's data).
Value tainted_string(std::string s);

}  // namespace minfer::jinja
