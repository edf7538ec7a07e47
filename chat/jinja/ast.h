// The syntax tree of a parsed template: expressions and statements, each with its source line
// for error messages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja/value.h"

namespace minfer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,    ///< value
    name,       ///< name
    list,       ///< items (tuple when is_tuple)
    dict,       ///< items as key, value, key, value, ...
    getattr,    ///< a.name
    getitem,    ///< a[b]
    slice,      ///< a[b:c:d] (missing parts are null)
    call,       ///< a(items..., kw names = values)
    filter,     ///< a | name(items..., kw)
    test,       ///< a is [not] name(items...)
    unary,      ///< op a: "not", "-", "+"
    binary,     ///< a op b: + - * / // % ** ~ == != < <= > >= in "not in" and or
    cond,       ///< b if a else c (c may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  ///< name, attribute, filter, test or operator
  bool negated = false;
  bool is_tuple = false;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;          ///< positional arguments / elements
  std::vector<std::string> kw_names;   ///< keyword argument names
  std::vector<ExprPtr> kw_values;
  int depth = 1;  ///< levels of this subtree (the parser bounds it: evaluation recurses over it)

  Expr(Kind k, int l) : kind(k), line(l) {}
};

/// The deepest a template's expressions and blocks may nest: the parser, the evaluator and the
/// tree's destruction recurse over them, so deeper input (a `1 ~ 1 ~ ...` of 5,000 terms, 10,000
/// parentheses, 30,000 nested ifs) is refused with a TemplateError instead of overflowing the
/// stack. Real chat templates nest a few tens of levels.
constexpr int kMaxNesting = 128;
/// Work bounds of one render (docs/chat-template.md): statements and loop iterations executed, and
/// the bytes of any string built (the output included). A template comes with a downloaded GGUF
/// or a request; these keep its render to seconds and its memory to tens of megabytes.
constexpr int64_t kMaxSteps = int64_t{1} << 20;
constexpr size_t kMaxStringBytes = size_t{1} << 24;
/// Items of a list built by `*` or `+` (a Value is ~170 bytes: 16 M items took 2.8 GB), and the
/// characters a per-character operation takes (iterating a string, case maps, replace('', ...):
/// ~250 bytes and ~3 us a character).
constexpr size_t kMaxListItems = size_t{1} << 20;
/// The bounds as messages name them: "16 M bytes", "1 M items".
inline std::string string_bound() { return std::to_string(kMaxStringBytes >> 20) + " M bytes"; }
inline std::string list_bound() { return std::to_string(kMaxListItems >> 20) + " M items"; }

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    text,       ///< text
    output,     ///< {{ expr }}
    if_,        ///< conds[i] -> bodies[i]; else_body
    for_,       ///< for targets in expr [if filter] ... else ...
    set,        ///< set targets = expr, or set ns.attr = expr (attr non-empty)
    set_block,  ///< {% set name %}...{% endset %} with optional filters
    macro,      ///< {% macro name(params) %}
    filter_block,  ///< {% filter f %}...{% endfilter %}
    break_,
    continue_,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                        ///< output / for iterable / set value
  ExprPtr filter;                      ///< for ... if filter; set_block/filter_block: filter chain applied to a name placeholder
  std::vector<std::string> targets;    ///< for / set names; macro parameter names
  std::string attr;                    ///< set ns.attr
  std::vector<ExprPtr> conds;          ///< if / elif conditions
  std::vector<Body> bodies;            ///< if branches; for/macro/set_block/filter_block body at [0]
  Body else_body;
  std::vector<ExprPtr> defaults;       ///< macro parameter defaults (null: required)
  bool recursive = false;

  Stmt(Kind k, int l) : kind(k), line(l) {}
};

}  // namespace minfer::jinja
