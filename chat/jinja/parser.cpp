#include "chat/jinja/parser.h"

#include <algorithm>
#include <set>

#include "chat/jinja/builtins.h"

namespace minfer::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw TemplateError("chat template line " + std::to_string(line) + ": " + what);
}

// Expression parser over the tokens of one tag.
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& toks, size_t pos = 0) : t_(toks), p_(pos) {}

  const Token& peek(size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::end; }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::op && peek(ahead).text == op;
  }
  bool is_name(std::string_view n, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::name && peek(ahead).text == n;
  }
  const Token& next() { return t_[std::min(p_++, t_.size() - 1)]; }
  void expect_op(std::string_view op) {
    if (!is_op(op)) fail(peek().line, "expected '" + std::string(op) + "', got " + describe(peek()));
    ++p_;
  }
  std::string expect_name() {
    if (peek().kind != Token::Kind::name) fail(peek().line, "expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_end() {
    if (!at_end()) fail(peek().line, "unexpected " + describe(peek()));
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::Kind::end: return "end of tag";
      case Token::Kind::string: return "string '" + t.text + "'";
      default: return "'" + t.text + "'";
    }
  }

  ExprPtr expression(bool with_cond = true) {
    const Nest nest(*this);
    ExprPtr e = or_expr();
    if (with_cond && is_name("if")) {
      const int line = next().line;
      auto c = std::make_unique<Expr>(Expr::Kind::cond, line);
      c->b = std::move(e);
      c->a = or_expr();
      if (is_name("else")) {
        next();
        c->c = expression();
      }
      return seal(std::move(c));
    }
    return e;
  }

  // Comma-separated expressions; a tuple when there is more than one (or a trailing comma).
  ExprPtr tuple_or_expr() {
    const int line = peek().line;
    ExprPtr first = expression();
    if (!is_op(",")) return first;
    auto t = std::make_unique<Expr>(Expr::Kind::list, line);
    t->is_tuple = true;
    t->items.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (at_end() || is_op(")") || is_op("=")) break;  // trailing comma: (1,)
      t->items.push_back(expression());
    }
    return seal(std::move(t));
  }

  ExprPtr primary_with_postfix() {
    ExprPtr e = primary();
    return postfix(std::move(e));
  }

 private:
  // Parser recursion (parentheses, brackets, arguments, `not` and sign chains) beyond
  // kMaxNesting is refused before it can overflow the stack.
  struct Nest {
    ExprParser& p;
    explicit Nest(ExprParser& parser) : p(parser) {
      if (++p.nest_ > kMaxNesting)
        fail(p.peek().line, "expression nested more than " + std::to_string(kMaxNesting) + " levels deep");
    }
    ~Nest() { --p.nest_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };

  // A finished node: its depth from its children's; a tree deeper than kMaxNesting (a long chain
  // of one operator or filter, built without recursion) is refused as it grows.
  ExprPtr seal(ExprPtr e) {
    int d = 0;
    for (const ExprPtr* c : {&e->a, &e->b, &e->c})
      if (*c) d = std::max(d, (*c)->depth);
    for (const auto* v : {&e->items, &e->kw_values})
      for (const ExprPtr& c : *v)
        if (c) d = std::max(d, c->depth);
    e->depth = d + 1;
    if (e->depth > kMaxNesting)
      fail(e->line, "expression nested more than " + std::to_string(kMaxNesting) + " levels deep");
    return e;
  }

  ExprPtr binary(const char* op, int line, ExprPtr a, ExprPtr b) {
    auto e = std::make_unique<Expr>(Expr::Kind::binary, line);
    e->name = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return seal(std::move(e));
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const int line = next().line;
      e = binary("or", line, std::move(e), and_expr());
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const int line = next().line;
      e = binary("and", line, std::move(e), not_expr());
    }
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      const Nest nest(*this);
      const int line = next().line;
      auto e = std::make_unique<Expr>(Expr::Kind::unary, line);
      e->name = "not";
      e->a = not_expr();
      return seal(std::move(e));
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    while (true) {
      const int line = peek().line;
      static const std::set<std::string> ops = {"==", "!=", "<", "<=", ">", ">="};
      if (peek().kind == Token::Kind::op && ops.count(peek().text)) {
        const std::string& op = *ops.find(next().text);
        e = binary(op.c_str(), line, std::move(e), math1());
      } else if (is_name("in")) {
        next();
        e = binary("in", line, std::move(e), math1());
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        e = binary("not in", line, std::move(e), math1());
      } else {
        return e;
      }
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      const std::string op = t.text;
      e = binary(op == "+" ? "+" : "-", t.line, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const int line = next().line;
      e = binary("~", line, std::move(e), math2());
    }
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      static const char* names[] = {"*", "/", "//", "%"};
      const char* op = nullptr;
      for (const char* n : names)
        if (t.text == n) op = n;
      e = binary(op, t.line, std::move(e), pow());
    }
    return e;
  }
  ExprPtr pow() {
    ExprPtr e = unary();
    while (is_op("**")) {
      const int line = next().line;
      e = binary("**", line, std::move(e), unary());
    }
    return e;
  }
  ExprPtr unary(bool with_filter = true) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Nest nest(*this);
      const Token& t = next();
      e = std::make_unique<Expr>(Expr::Kind::unary, t.line);
      e->name = t.text;
      e->a = unary(false);
      e = seal(std::move(e));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filters_and_tests(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = next();
    const int line = t.line;
    switch (t.kind) {
      case Token::Kind::name: {
        if (t.text == "true" || t.text == "True") return literal(Value::boolean(true), line);
        if (t.text == "false" || t.text == "False") return literal(Value::boolean(false), line);
        if (t.text == "none" || t.text == "None") return literal(Value::none(), line);
        auto e = std::make_unique<Expr>(Expr::Kind::name, line);
        e->name = t.text;
        return e;
      }
      case Token::Kind::string: {
        std::string s = t.text;
        while (peek().kind == Token::Kind::string) s += next().text;  // adjacent literals concatenate
        return literal(Value::string(Text(s)), line);
      }
      case Token::Kind::integer: return literal(Value::integer(t.int_value), line);
      case Token::Kind::floating: return literal(Value::floating(t.float_value), line);
      case Token::Kind::op:
        if (t.text == "(") {
          if (is_op(")")) {
            next();
            auto e = std::make_unique<Expr>(Expr::Kind::list, line);
            e->is_tuple = true;
            return e;
          }
          ExprPtr inner = tuple_or_expr();
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          auto e = std::make_unique<Expr>(Expr::Kind::list, line);
          while (!is_op("]")) {
            e->items.push_back(expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return seal(std::move(e));
        }
        if (t.text == "{") {
          auto e = std::make_unique<Expr>(Expr::Kind::dict, line);
          while (!is_op("}")) {
            e->items.push_back(expression());
            expect_op(":");
            e->items.push_back(expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return seal(std::move(e));
        }
        break;
      case Token::Kind::end: fail(line, "unexpected end of tag, expected an expression");
    }
    fail(line, "unexpected " + describe(t));
  }

  ExprPtr literal(Value v, int line) {
    auto e = std::make_unique<Expr>(Expr::Kind::literal, line);
    e->value = std::move(v);
    return e;
  }

  // Arguments after "(" up to ")": positional, then name=value.
  void call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Token::Kind::name && is_op("=", 1)) {
        e.kw_names.push_back(next().text);
        next();
        e.kw_values.push_back(expression());
      } else {
        if (!e.kw_names.empty()) fail(peek().line, "positional argument after a keyword argument");
        e.items.push_back(expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (is_op(".")) {
        next();
        const Token& t = next();
        if (t.kind == Token::Kind::integer) {
          auto g = std::make_unique<Expr>(Expr::Kind::getitem, line);
          g->a = std::move(e);
          g->b = literal(Value::integer(t.int_value), line);
          e = seal(std::move(g));
          continue;
        }
        if (t.kind != Token::Kind::name) fail(line, "expected an attribute name after '.'");
        auto g = std::make_unique<Expr>(Expr::Kind::getattr, line);
        g->a = std::move(e);
        g->name = t.text;
        e = seal(std::move(g));
      } else if (is_op("[")) {
        next();
        ExprPtr parts[3];
        int n_colons = 0;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = expression();
          if (is_op(":") && k < 2) {
            next();
            ++n_colons;
          } else {
            break;
          }
        }
        expect_op("]");
        if (n_colons == 0) {
          if (!parts[0]) fail(line, "empty subscript '[]'");
          auto g = std::make_unique<Expr>(Expr::Kind::getitem, line);
          g->a = std::move(e);
          g->b = std::move(parts[0]);
          e = seal(std::move(g));
        } else {
          auto s = std::make_unique<Expr>(Expr::Kind::slice, line);
          s->a = std::move(e);
          s->b = std::move(parts[0]);
          s->c = std::move(parts[1]);
          if (parts[2]) s->items.push_back(std::move(parts[2]));
          e = seal(std::move(s));
        }
      } else if (is_op("(")) {
        auto c = std::make_unique<Expr>(Expr::Kind::call, line);
        c->a = std::move(e);
        call_args(*c);
        e = seal(std::move(c));
      } else {
        return e;
      }
    }
  }

 public:
  ExprPtr filters_and_tests(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (is_op("|")) {
        next();
        std::string name = expect_name();
        while (is_op(".")) {  // dotted filter names are not supported; report the whole name
          next();
          name += "." + expect_name();
        }
        if (!has_filter(name)) fail(line, "unsupported filter '" + name + "'");
        auto f = std::make_unique<Expr>(Expr::Kind::filter, line);
        f->name = name;
        f->a = std::move(e);
        if (is_op("(")) call_args(*f);
        e = seal(std::move(f));
      } else if (is_name("is")) {
        next();
        auto t = std::make_unique<Expr>(Expr::Kind::test, line);
        if (is_name("not")) {
          next();
          t->negated = true;
        }
        // `none`, `true`, `false` are test names too.
        t->name = expect_name();
        if (!has_test(t->name)) fail(line, "unsupported test '" + t->name + "'");
        t->a = std::move(e);
        if (is_op("(")) {
          call_args(*t);
        } else if (!at_end() && (peek().kind == Token::Kind::string || peek().kind == Token::Kind::integer ||
                                 peek().kind == Token::Kind::floating ||
                                 (peek().kind == Token::Kind::name && !is_name("and") && !is_name("or") &&
                                  !is_name("if") && !is_name("else") && !is_name("is") && !is_name("in") &&
                                  !is_name("not")))) {
          // `x is divisibleby 3`, `x is sameas y`: one argument without parentheses.
          t->items.push_back(primary_with_postfix());
        }
        e = seal(std::move(t));
      } else if (is_op("(")) {
        auto c = std::make_unique<Expr>(Expr::Kind::call, line);
        c->a = std::move(e);
        call_args(*c);
        e = seal(std::move(c));
      } else {
        return e;
      }
    }
  }

 private:
  const std::vector<Token>& t_;
  size_t p_;
  int nest_ = 0;

 public:
  size_t pos() const { return p_; }
};

class StmtParser {
 public:
  explicit StmtParser(const std::vector<Piece>& pieces) : ps_(pieces) {}

  Body parse_all() {
    std::string end;
    Body b = parse_body({}, end);
    return b;
  }

 private:
  static std::string keyword(const Piece& p) {
    return p.tokens.empty() || p.tokens[0].kind != Token::Kind::name ? std::string() : p.tokens[0].text;
  }

  // Parses statements until one of `ends` (returned in `end`); at top level `ends` is empty.
  Body parse_body(const std::set<std::string>& ends, std::string& end) {
    Body body;
    while (i_ < ps_.size()) {
      const Piece& p = ps_[i_];
      if (p.kind == Piece::Kind::text) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::text, p.line);
        s->text = p.text;
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (p.kind == Piece::Kind::output) {
        ExprParser ep(p.tokens);
        auto s = std::make_unique<Stmt>(Stmt::Kind::output, p.line);
        s->expr = ep.tuple_or_expr();
        ep.expect_end();
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      const std::string kw = keyword(p);
      if (ends.count(kw)) {
        end = kw;
        return body;
      }
      ++i_;
      body.push_back(statement(p, kw));
    }
    if (!ends.empty()) {
      std::string list;
      for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
      fail(open_line_, "unexpected end of template, expected " + list);
    }
    return body;
  }

  StmtPtr statement(const Piece& p, const std::string& kw) {
    const int line = p.line;
    if (nest_ >= kMaxNesting)  // block statements recurse through parse_body
      fail(line, "blocks nested more than " + std::to_string(kMaxNesting) + " levels deep");
    ++nest_;
    struct Leave {
      int& n;
      ~Leave() { --n; }
    } leave{nest_};
    const int saved_open = open_line_;
    open_line_ = line;
    StmtPtr s;
    if (kw == "if") s = parse_if(p);
    else if (kw == "for") s = parse_for(p);
    else if (kw == "set") s = parse_set(p);
    else if (kw == "macro") s = parse_macro(p);
    else if (kw == "filter") s = parse_filter_block(p);
    else if (kw == "generation") s = parse_generation(p);
    else if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) fail(line, "'" + kw + "' outside a for loop");
      ExprParser ep(p.tokens, 1);
      ep.expect_end();
      s = std::make_unique<Stmt>(kw == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_, line);
    } else if (kw.empty()) {
      fail(line, "a block tag must start with a statement name");
    } else if (kw.starts_with("end") || kw == "elif" || kw == "else") {
      fail(line, "unexpected '" + kw + "' (no open block it closes)");
    } else {
      fail(line, "unsupported statement '" + kw + "' (supported: if, for, set, macro, filter, break, continue)");
    }
    open_line_ = saved_open;
    return s;
  }

  StmtPtr parse_if(const Piece& first) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::if_, first.line);
    const Piece* p = &first;
    while (true) {
      ExprParser ep(p->tokens, 1);
      s->conds.push_back(ep.expression());
      ep.expect_end();
      std::string end;
      s->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
      const Piece& term = ps_[i_++];
      if (end == "elif") {
        p = &term;
        continue;
      }
      if (end == "else") {
        ExprParser(term.tokens, 1).expect_end();
        s->else_body = parse_body({"endif"}, end);
        ++i_;
      }
      return s;
    }
  }

  StmtPtr parse_for(const Piece& p) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::for_, p.line);
    ExprParser ep(p.tokens, 1);
    s->targets.push_back(ep.expect_name());
    while (ep.is_op(",")) {
      ep.next();
      s->targets.push_back(ep.expect_name());
    }
    if (!ep.is_name("in")) fail(p.line, "expected 'in' in the for statement");
    ep.next();
    s->expr = ep.expression(/*with_cond=*/false);
    if (ep.is_name("if")) {
      ep.next();
      s->filter = ep.expression();
    }
    if (ep.is_name("recursive")) fail(p.line, "unsupported: recursive for loops");
    ep.expect_end();
    ++loop_depth_;
    std::string end;
    s->bodies.push_back(parse_body({"else", "endfor"}, end));
    --loop_depth_;
    ++i_;
    if (end == "else") {
      s->else_body = parse_body({"endfor"}, end);
      ++i_;
    }
    return s;
  }

  StmtPtr parse_set(const Piece& p) {
    ExprParser ep(p.tokens, 1);
    auto s = std::make_unique<Stmt>(Stmt::Kind::set, p.line);
    s->targets.push_back(ep.expect_name());
    if (ep.is_op(".")) {
      ep.next();
      s->attr = ep.expect_name();
    } else {
      while (ep.is_op(",")) {
        ep.next();
        s->targets.push_back(ep.expect_name());
      }
    }
    if (ep.is_op("=")) {
      ep.next();
      s->expr = ep.tuple_or_expr();
      ep.expect_end();
      return s;
    }
    // Block set: {% set name %}...{% endset %}, optionally {% set name | filter %}.
    if (s->targets.size() != 1 || !s->attr.empty()) fail(p.line, "a block set assigns one name");
    s->kind = Stmt::Kind::set_block;
    if (ep.is_op("|")) {
      auto placeholder = std::make_unique<Expr>(Expr::Kind::name, p.line);
      placeholder->name = "\x01block";
      s->filter = ep.filters_and_tests(std::move(placeholder));
    }
    ep.expect_end();
    std::string end;
    s->bodies.push_back(parse_body({"endset"}, end));
    ++i_;
    return s;
  }

  StmtPtr parse_macro(const Piece& p) {
    ExprParser ep(p.tokens, 1);
    auto s = std::make_unique<Stmt>(Stmt::Kind::macro, p.line);
    s->text = ep.expect_name();
    ep.expect_op("(");
    while (!ep.is_op(")")) {
      s->targets.push_back(ep.expect_name());
      if (ep.is_op("=")) {
        ep.next();
        s->defaults.push_back(ep.expression());
      } else {
        s->defaults.push_back(nullptr);
      }
      if (!ep.is_op(",")) break;
      ep.next();
    }
    ep.expect_op(")");
    ep.expect_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    s->bodies.push_back(parse_body({"endmacro"}, end));
    loop_depth_ = saved;
    ++i_;
    return s;
  }

  StmtPtr parse_filter_block(const Piece& p) {
    std::vector<Token> toks = p.tokens;  // "filter f | g" is parsed as "| f | g"
    toks[0].kind = Token::Kind::op;
    toks[0].text = "|";
    ExprParser ep(toks, 0);
    auto s = std::make_unique<Stmt>(Stmt::Kind::filter_block, p.line);
    auto placeholder = std::make_unique<Expr>(Expr::Kind::name, p.line);
    placeholder->name = "\x01block";
    s->filter = ep.filters_and_tests(std::move(placeholder));
    ep.expect_end();
    std::string end;
    s->bodies.push_back(parse_body({"endfilter"}, end));
    ++i_;
    return s;
  }

  // HF's AssistantTracker: {% generation %}...{% endgeneration %} marks assistant text for
  // training masks; rendering is the body unchanged.
  StmtPtr parse_generation(const Piece& p) {
    ExprParser(p.tokens, 1).expect_end();
    auto s = std::make_unique<Stmt>(Stmt::Kind::if_, p.line);
    auto yes = std::make_unique<Expr>(Expr::Kind::literal, p.line);
    yes->value = Value::boolean(true);
    s->conds.push_back(std::move(yes));
    std::string end;
    s->bodies.push_back(parse_body({"endgeneration"}, end));
    ++i_;
    return s;
  }

  const std::vector<Piece>& ps_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int nest_ = 0;  // block statements being parsed
  int open_line_ = 1;
};

}  // namespace

Body parse(const std::vector<Piece>& pieces) { return StmtParser(pieces).parse_all(); }

}  // namespace minfer::jinja
