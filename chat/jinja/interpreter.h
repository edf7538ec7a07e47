// The Jinja evaluator: runs a parsed template against a context of variables and produces the
// rendered Text (with its taint mask).
//
// Semantics are Jinja2's as Hugging Face runs chat templates (ImmutableSandboxedEnvironment,
// default Undefined): an undefined name renders as "" and is falsy, but taking an attribute of it
// or doing arithmetic with it is an error; `a.b` tries the attribute (dict methods such as
// items/get) and then the key, `a['b']` the key and then the attribute; a `set` inside a for
// loop does not leak out of it (namespace() objects carry state across iterations); macros have
// their own scope; lists and dicts cannot be modified by the template.
#pragma once

#include <memory>
#include <string>

#include "chat/jinja/ast.h"
#include "chat/jinja/builtins.h"

namespace minfer::jinja {

class Interpreter {
 public:
  /// `globals` is a dict of the variables the template sees. `root` must outlive the interpreter.
  Interpreter(const Body& root, const Value& globals);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  /// Renders the template. Throws TemplateError naming the line on any runtime error.
  Text render();

  Value eval(const Expr& e);
  /// Calls a function value.
  Value call(const Value& fn, CallArgs& args, int line);
  /// `a.name` with Jinja2's attribute-then-item rule.
  Value getattr(const Value& obj, const std::string& name, int line);
  /// `a[key]` with Jinja2's item-then-attribute rule.
  Value getitem(const Value& obj, const Value& key, int line);
  /// Iterates a value the way a for loop does (dict: keys; string: characters).
  List iterate(const Value& v, int line);

  [[noreturn]] static void fail(int line, const std::string& what);
  /// Fails (TemplateError at `line`) when `t` is over kMaxStringBytes.
  static void check_size(const Text& t, int line);

  /// Registers a namespace() object: emptied when the interpreter ends, so that a namespace
  /// holding itself cannot leak.
  void track_namespace(const std::shared_ptr<Dict>& d);

 private:
  struct Scope {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Scope> parent;
    Value* find(const std::string& name);
    void set(const std::string& name, Value v);
  };
  enum class Flow { normal, break_, continue_ };

  Flow exec(const Body& body, Text& out);
  Flow exec_stmt(const Stmt& s, Text& out);
  void exec_for(const Stmt& s, Text& out);
  void assign(const std::vector<std::string>& targets, const Value& v, int line);
  Value make_macro(const Stmt& s);
  Value binary(const Expr& e);
  Value apply_filter_chain(const Expr& chain, const Value& input);

  const Body& root_;
  std::shared_ptr<Scope> scope_;
  std::vector<std::weak_ptr<Dict>> namespaces_;
  int depth_ = 0;  // macro call depth, to stop runaway recursion with an error
  int64_t steps_ = 0;  // statements and loop iterations so far (kMaxSteps)
  void tick(int line);
};

}  // namespace minfer::jinja
