#include "chat/jinja/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "chat/jinja/pystr.h"

namespace minfer::jinja {

void Interpreter::fail(int line, const std::string& what) {
  throw TemplateError("chat template line " + std::to_string(line) + ": " + what);
}

Value* Interpreter::Scope::find(const std::string& name) {
  for (Scope* s = this; s; s = s->parent.get())
    for (auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Interpreter::Scope::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Interpreter::Interpreter(const Body& root, const Value& globals) : root_(root), scope_(std::make_shared<Scope>()) {
  if (globals.is_dict())
    for (const auto& [k, v] : globals.dict->items) scope_->set(k.str.s, v);
}

Interpreter::~Interpreter() {
  // namespace() objects are the only mutable values: one that holds itself would keep itself
  // alive. Emptying them after the render breaks every such cycle.
  for (const auto& w : namespaces_)
    if (const auto d = w.lock()) d->items.clear();
}

void Interpreter::track_namespace(const std::shared_ptr<Dict>& d) { namespaces_.push_back(d); }

Text Interpreter::render() {
  Text out;
  exec(root_, out);
  return out;
}

void Interpreter::tick(int line) {
  if (++steps_ > kMaxSteps)
    fail(line, "the template ran more than " + std::to_string(kMaxSteps) + " statements and loop iterations");
}

void Interpreter::check_size(const Text& t, int line) {
  if (t.s.size() > kMaxStringBytes) fail(line, "the template built a string over " + string_bound());
}

Interpreter::Flow Interpreter::exec(const Body& body, Text& out) {
  for (const auto& s : body) {
    tick(s->line);
    const Flow f = exec_stmt(*s, out);
    check_size(out, s->line);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

void Interpreter::assign(const std::vector<std::string>& targets, const Value& v, int line) {
  if (targets.size() == 1) {
    scope_->set(targets[0], v);
    return;
  }
  const List items = iterate(v, line);
  if (items.size() != targets.size())
    fail(line, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) + " names");
  for (size_t k = 0; k < targets.size(); ++k) scope_->set(targets[k], items[k]);
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, Text& out) {
  switch (s.kind) {
    case Stmt::Kind::text: out.append(s.text); return Flow::normal;
    case Stmt::Kind::output: out.append(eval(*s.expr).to_text()); return Flow::normal;
    case Stmt::Kind::if_:
      for (size_t k = 0; k < s.conds.size(); ++k)
        if (eval(*s.conds[k]).truthy()) return exec(s.bodies[k], out);
      return exec(s.else_body, out);
    case Stmt::Kind::for_: exec_for(s, out); return Flow::normal;
    case Stmt::Kind::set: {
      Value v = eval(*s.expr);
      if (!s.attr.empty()) {
        Value* ns = scope_->find(s.targets[0]);
        if (!ns || ns->kind != Value::Kind::ns)
          fail(s.line, "cannot assign attribute '" + s.attr + "' on '" + s.targets[0] + "', which is not a namespace()");
        ns->dict->set(s.attr, std::move(v));
      } else {
        assign(s.targets, v, s.line);
      }
      return Flow::normal;
    }
    case Stmt::Kind::set_block: {
      Text body;
      exec(s.bodies[0], body);
      Value v = Value::string(std::move(body));
      if (s.filter) v = apply_filter_chain(*s.filter, v);
      scope_->set(s.targets[0], std::move(v));
      return Flow::normal;
    }
    case Stmt::Kind::filter_block: {
      Text body;
      exec(s.bodies[0], body);
      out.append(apply_filter_chain(*s.filter, Value::string(std::move(body))).to_text());
      return Flow::normal;
    }
    case Stmt::Kind::macro: scope_->set(s.text, make_macro(s)); return Flow::normal;
    case Stmt::Kind::break_: return Flow::break_;
    case Stmt::Kind::continue_: return Flow::continue_;
  }
  return Flow::normal;
}

void Interpreter::exec_for(const Stmt& s, Text& out) {
  List items = iterate(eval(*s.expr), s.line);
  auto saved = scope_;
  scope_ = std::make_shared<Scope>();
  scope_->parent = saved;
  if (s.filter) {  // {% for x in xs if cond %}: loop.* counts the kept items only
    List kept;
    for (const Value& it : items) {
      assign(s.targets, it, s.line);
      if (eval(*s.filter).truthy()) kept.push_back(it);
    }
    items = std::move(kept);
  }
  const auto n = static_cast<int64_t>(items.size());
  Value loop = Value::new_dict();
  for (int64_t k = 0; k < n; ++k) {
    Dict& d = *loop.dict;
    d.set("index", Value::integer(k + 1));
    d.set("index0", Value::integer(k));
    d.set("revindex", Value::integer(n - k));
    d.set("revindex0", Value::integer(n - k - 1));
    d.set("first", Value::boolean(k == 0));
    d.set("last", Value::boolean(k == n - 1));
    d.set("length", Value::integer(n));
    d.set("depth", Value::integer(1));
    d.set("depth0", Value::integer(0));
    d.set("previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("loop.previtem"));
    d.set("nextitem", k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value::undefined("loop.nextitem"));
    d.set("cycle", Value::function([k](Interpreter&, CallArgs& a) {
      if (a.args.empty()) throw TemplateError("loop.cycle() needs at least one value");
      return a.args[static_cast<size_t>(k) % a.args.size()];
    }));
    // A fresh scope per iteration, as Jinja2's: a {% set %} in the body does not carry over
    // into the next iteration (templates test `x is defined` on a name set the round before).
    tick(s.line);
    scope_ = std::make_shared<Scope>();
    scope_->parent = saved;
    scope_->set("loop", loop);
    assign(s.targets, items[static_cast<size_t>(k)], s.line);
    const Flow f = exec(s.bodies[0], out);
    if (f == Flow::break_) break;
    // A fresh dict per iteration: a `{% set outer = loop %}` keeps its own values.
    loop = Value::new_dict();
  }
  scope_ = saved;
  if (n == 0) exec(s.else_body, out);
}

Value Interpreter::make_macro(const Stmt& s) {
  const Stmt* def = &s;
  // Weak: the macro lives in the scope it closes over, and a strong pointer would be a cycle
  // that outlives the render.
  std::weak_ptr<Scope> weak_defining = scope_;
  return Value::function([def, weak_defining](Interpreter& in, CallArgs& a) {
    const std::shared_ptr<Scope> defining = weak_defining.lock();
    if (!defining) fail(a.line, "macro '" + def->text + "' is called outside the scope that defined it");
    if (in.depth_ > 200) fail(def->line, "macro '" + def->text + "' recursion is too deep");
    if (a.args.size() > def->targets.size())
      fail(a.line, "macro '" + def->text + "' takes " + std::to_string(def->targets.size()) + " arguments, " +
                       std::to_string(a.args.size()) + " given");
    auto saved = in.scope_;
    in.scope_ = std::make_shared<Scope>();
    in.scope_->parent = defining;
    ++in.depth_;
    struct Restore {
      Interpreter& in;
      std::shared_ptr<Scope> s;
      ~Restore() {
        in.scope_ = s;
        --in.depth_;
      }
    } restore{in, saved};
    for (const auto& [name, v] : a.kwargs) {
      bool known = false;
      for (const auto& t : def->targets) known = known || t == name;
      if (!known) fail(a.line, "macro '" + def->text + "' has no parameter '" + name + "'");
    }
    for (size_t k = 0; k < def->targets.size(); ++k) {
      const std::string& p = def->targets[k];
      Value v;
      if (k < a.args.size()) v = a.args[k];
      else {
        bool found = false;
        for (const auto& [name, kv] : a.kwargs)
          if (name == p) {
            v = kv;
            found = true;
          }
        if (!found) v = def->defaults[k] ? in.eval(*def->defaults[k]) : Value::undefined(p);
      }
      in.scope_->set(p, std::move(v));
    }
    Text out;
    in.exec(def->bodies[0], out);
    return Value::string(std::move(out));
  });
}

Value Interpreter::apply_filter_chain(const Expr& chain, const Value& input) {
  // The chain was parsed over a placeholder name; evaluate it with the placeholder bound.
  auto saved = scope_;
  scope_ = std::make_shared<Scope>();
  scope_->parent = saved;
  scope_->set("\x01block", input);
  Value v = eval(chain);
  scope_ = saved;
  return v;
}

List Interpreter::iterate(const Value& v, int line) {
  switch (v.kind) {
    case Value::Kind::undefined: return {};
    case Value::Kind::list: return *v.list;
    case Value::Kind::dict: {
      List keys;
      for (const auto& [k, x] : v.dict->items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::string: {
      if (pystr::length(v.str) > kMaxListItems) fail(line, "iterating a string of over " + list_bound() + " (characters)");
      List chars;
      for (const Text& c : pystr::chars(v.str)) chars.push_back(Value::string(c));
      return chars;
    }
    default: fail(line, "'" + v.type_name() + "' object is not iterable");
  }
}

Value Interpreter::getattr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined())
    fail(line, "'" + (obj.undefined_name.empty() ? std::string("value") : obj.undefined_name) +
                   "' is undefined (taking its attribute '" + name + "')");
  if (obj.kind == Value::Kind::ns) {
    const Value* v = obj.dict->find(name);
    return v ? *v : Value::undefined(name);
  }
  if (Value m = bound_method(obj, name); !m.is_undefined()) return m;
  if (obj.is_dict()) {
    const Value* v = obj.dict->find(name);
    return v ? *v : Value::undefined(name);
  }
  return Value::undefined(name);
}

Value Interpreter::getitem(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined())
    fail(line, "'" + (obj.undefined_name.empty() ? std::string("value") : obj.undefined_name) + "' is undefined (subscripted with " +
                   key.repr().s + ")");
  if (obj.is_dict() || obj.kind == Value::Kind::ns) {
    if (const Value* v = obj.dict->find(key)) return *v;
    if (key.is_string()) return getattr(obj, key.str.s, line);
    return Value::undefined(key.repr().s);
  }
  // Indexing neither copies a list nor splits a whole string: templates index in loops.
  if (obj.is_string() && key.is_integer()) {
    if (auto c = pystr::char_at(obj.str, key.i)) return Value::string(std::move(*c));
    return Value::undefined("index " + std::to_string(key.i));
  }
  if (obj.is_list() && key.is_integer()) {
    const List& items = *obj.list;
    int64_t k = key.i;
    const auto n = static_cast<int64_t>(items.size());
    if (k < 0) k += n;
    if (k < 0 || k >= n) return Value::undefined("index " + std::to_string(key.i));
    return items[static_cast<size_t>(k)];
  }
  if (key.is_string()) return getattr(obj, key.str.s, line);
  return Value::undefined(key.repr().s);
}

Value Interpreter::call(const Value& fn, CallArgs& args, int line) {
  if (!fn.is_callable()) {
    if (fn.is_undefined())
      fail(line, "'" + (fn.undefined_name.empty() ? std::string("value") : fn.undefined_name) +
                     "' is undefined (called as a function; unsupported global or method?)");
    fail(line, "'" + fn.type_name() + "' object is not callable");
  }
  args.line = line;
  try {
    return (*fn.fn)(*this, args);
  } catch (const TemplateError& e) {
    const std::string what = e.what();
    if (what.starts_with("chat template line ")) throw;
    fail(line, what);
  }
}

namespace {

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step, int line) {
  const bool is_str = obj.is_string();
  List items;
  std::vector<Text> chars;
  size_t n = 0;
  if (is_str) {
    n = pystr::length(obj.str);
  } else if (obj.is_list()) {
    n = obj.list->size();
  } else {
    Interpreter::fail(line, "cannot slice a '" + obj.type_name() + "'");
  }
  auto opt = [&](const Value& v) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_integer()) Interpreter::fail(line, "slice indices must be integers");
    return v.i;
  };
  const int64_t st = opt(step).value_or(1);
  if (st == 0) Interpreter::fail(line, "slice step cannot be zero");
  const auto len = static_cast<int64_t>(n);
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += len;
    if (st > 0) return std::clamp<int64_t>(x, 0, len);
    return std::clamp<int64_t>(x, -1, len - 1);
  };
  const int64_t a = clamp(opt(start), st > 0 ? 0 : len - 1);
  const int64_t b = clamp(opt(stop), st > 0 ? len : -1);
  // A plain slice is a span of the text; only a stepped one goes character by character (bounded).
  if (is_str && st == 1) return Value::string(b > a ? pystr::span(obj.str, static_cast<size_t>(a), static_cast<size_t>(b)) : Text());
  if (is_str) chars = pystr::chars(obj.str);
  Text s;
  for (int64_t k = a; st > 0 ? k < b : k > b; k += st) {
    if (is_str) s.append(chars[static_cast<size_t>(k)]);
    else items.push_back((*obj.list)[static_cast<size_t>(k)]);
  }
  if (is_str) return Value::string(std::move(s));
  return Value::new_list(std::move(items), obj.is_tuple);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value Interpreter::binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value a = eval(*e.a);
    return a.truthy() ? eval(*e.b) : a;
  }
  if (op == "or") {
    Value a = eval(*e.a);
    return a.truthy() ? a : eval(*e.b);
  }
  const Value a = eval(*e.a);
  const Value b = eval(*e.b);
  // Integers are 64-bit (Python's are unbounded): a result that does not fit is an error, never a
  // wrapped value.
  int64_t r = 0;  // the result of a checked integer operation (checked() reads it afterwards)
  const auto checked = [&](bool overflow) {
    if (overflow) fail(e.line, "integer overflow in '" + op + "' (template integers are 64-bit)");
    return Value::integer(r);
  };
  if (op == "==") return Value::boolean(equals(a, b));
  if (op == "!=") return Value::boolean(!equals(a, b));
  if (op == "~") {
    Text t = a.to_text();
    t.append(b.to_text());
    check_size(t, e.line);
    return Value::string(std::move(t));
  }
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) fail(e.line, "'in <string>' requires a string as left operand, not " + a.type_name());
      found = b.str.s.find(a.str.s) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& x : *b.list) found = found || equals(x, a);
    } else if (b.is_dict() || b.kind == Value::Kind::ns) {
      found = b.dict->find(a) != nullptr;
    } else if (!b.is_undefined()) {
      fail(e.line, "argument of type '" + b.type_name() + "' is not iterable");
    }
    return Value::boolean(op == "in" ? found : !found);
  }
  auto undefined_operand = [&](const Value& v) {
    fail(e.line, "'" + (v.undefined_name.empty() ? std::string("value") : v.undefined_name) + "' is undefined (operand of '" + op + "')");
  };
  if (a.is_undefined()) undefined_operand(a);
  if (b.is_undefined()) undefined_operand(b);
  if (op == "<") return Value::boolean(less(a, b));
  if (op == ">") return Value::boolean(less(b, a));
  if (op == "<=") return Value::boolean(!less(b, a));
  if (op == ">=") return Value::boolean(!less(a, b));
  auto bad = [&]() -> Value {
    fail(e.line, "unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      Text t = a.str;
      t.append(b.str);
      check_size(t, e.line);
      return Value::string(std::move(t));
    }
    if (a.is_list() && b.is_list()) {
      if (a.list->size() + b.list->size() > kMaxListItems) fail(e.line, "'+' makes a list over " + list_bound());
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::new_list(std::move(l), a.is_tuple);
    }
    if (a.is_number() && b.is_number()) {
      if (a.is_integer() && b.is_integer()) return checked(__builtin_add_overflow(a.i, b.i, &r));
      return Value::floating(a.as_double() + b.as_double());
    }
    return bad();
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && b.is_integer()) {
      const Value& seq = a;
      const size_t unit = seq.is_string() ? seq.str.s.size() : seq.list->size();
      const uint64_t cap = seq.is_string() ? kMaxStringBytes : kMaxListItems;
      if (b.i > 0 && unit > 0 && static_cast<uint64_t>(b.i) > cap / unit)
        fail(e.line, "repetition '*' " + std::to_string(b.i) + " makes a value over " +
                         (seq.is_string() ? string_bound() : list_bound()));
      Value r = seq.is_string() ? Value::string(Text()) : Value::new_list({}, seq.is_tuple);
      for (int64_t k = 0; k < b.i; ++k) {
        if (seq.is_string()) r.str.append(seq.str);
        else r.list->insert(r.list->end(), seq.list->begin(), seq.list->end());
      }
      return r;
    }
    if (a.is_number() && b.is_number()) {
      if (a.is_integer() && b.is_integer()) return checked(__builtin_mul_overflow(a.i, b.i, &r));
      return Value::floating(a.as_double() * b.as_double());
    }
    return bad();
  }
  if (!a.is_number() || !b.is_number()) {
    if (op == "%" && a.is_string()) fail(e.line, "unsupported: printf-style string formatting with '%'");
    return bad();
  }
  if (op == "-") {
    if (a.is_integer() && b.is_integer()) return checked(__builtin_sub_overflow(a.i, b.i, &r));
    return Value::floating(a.as_double() - b.as_double());
  }
  if (op == "/") {
    if (b.as_double() == 0) fail(e.line, "division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) fail(e.line, "integer division or modulo by zero");
    if (a.is_integer() && b.is_integer()) {
      if (a.i == std::numeric_limits<int64_t>::min() && b.i == -1) return checked(true);
      const int64_t q = floor_div(a.i, b.i);
      return op == "//" ? Value::integer(q) : Value::integer(a.i - q * b.i);
    }
    const double x = a.as_double(), y = b.as_double();
    const double q = std::floor(x / y);
    return op == "//" ? Value::floating(q) : Value::floating(x - q * y);
  }
  if (op == "**") {
    if (a.is_integer() && b.is_integer() && b.i >= 0) {  // by squaring: 1 ** 10**12 looped 10**12 times
      int64_t base = a.i;
      bool over = false;
      r = 1;
      for (int64_t n = b.i; n > 0 && !over; n >>= 1) {
        if (n & 1) over = __builtin_mul_overflow(r, base, &r);
        if (n > 1 && !over) over = __builtin_mul_overflow(base, base, &base);
      }
      return checked(over);
    }
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  fail(e.line, "unsupported operator '" + op + "'");
}

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: {
      if (Value* v = scope_->find(e.name)) return *v;
      if (Value g = global_function(e.name); !g.is_undefined()) return g;
      return Value::undefined(e.name);
    }
    case Expr::Kind::list: {
      List items;
      for (const auto& x : e.items) items.push_back(eval(*x));
      return Value::new_list(std::move(items), e.is_tuple);
    }
    case Expr::Kind::dict: {
      Value d = Value::new_dict();
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) d.dict->set(eval(*e.items[k]), eval(*e.items[k + 1]));
      return d;
    }
    case Expr::Kind::getattr: return getattr(eval(*e.a), e.name, e.line);
    case Expr::Kind::getitem: return getitem(eval(*e.a), eval(*e.b), e.line);
    case Expr::Kind::slice: {
      const Value obj = eval(*e.a);
      if (obj.is_undefined()) fail(e.line, "'" + obj.undefined_name + "' is undefined (sliced)");
      const Value start = e.b ? eval(*e.b) : Value::none();
      const Value stop = e.c ? eval(*e.c) : Value::none();
      const Value step = e.items.empty() ? Value::none() : eval(*e.items[0]);
      return slice_value(obj, start, stop, step, e.line);
    }
    case Expr::Kind::call: {
      const Value fn = eval(*e.a);
      CallArgs args;
      for (const auto& x : e.items) args.args.push_back(eval(*x));
      for (size_t k = 0; k < e.kw_names.size(); ++k) args.kwargs.emplace_back(e.kw_names[k], eval(*e.kw_values[k]));
      return call(fn, args, e.line);
    }
    case Expr::Kind::filter: {
      const Value v = eval(*e.a);
      CallArgs args;
      args.line = e.line;
      for (const auto& x : e.items) args.args.push_back(eval(*x));
      for (size_t k = 0; k < e.kw_names.size(); ++k) args.kwargs.emplace_back(e.kw_names[k], eval(*e.kw_values[k]));
      try {
        return apply_filter(*this, e.name, v, args);
      } catch (const TemplateError& err) {
        const std::string what = err.what();
        if (what.starts_with("chat template line ")) throw;
        fail(e.line, "filter '" + e.name + "': " + what);
      }
    }
    case Expr::Kind::test: {
      const Value v = eval(*e.a);
      CallArgs args;
      args.line = e.line;
      for (const auto& x : e.items) args.args.push_back(eval(*x));
      try {
        const bool r = apply_test(*this, e.name, v, args);
        return Value::boolean(e.negated ? !r : r);
      } catch (const TemplateError& err) {
        const std::string what = err.what();
        if (what.starts_with("chat template line ")) throw;
        fail(e.line, "test '" + e.name + "': " + what);
      }
    }
    case Expr::Kind::unary: {
      const Value a = eval(*e.a);
      if (e.name == "not") return Value::boolean(!a.truthy());
      if (!a.is_number()) fail(e.line, "bad operand type for unary " + e.name + ": '" + a.type_name() + "'");
      if (e.name == "+") return a.kind == Value::Kind::floating ? a : Value::integer(a.i);
      return a.kind == Value::Kind::floating ? Value::floating(-a.f) : Value::integer(-a.i);
    }
    case Expr::Kind::binary: return binary(e);
    case Expr::Kind::cond:
      if (eval(*e.a).truthy()) return eval(*e.b);
      return e.c ? eval(*e.c) : Value::undefined("else branch");
  }
  fail(e.line, "unknown expression");
}

}  // namespace minfer::jinja
