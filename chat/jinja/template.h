// A compiled Jinja template: minfer's own interpreter of the Jinja subset that model chat
// templates use (docs/chat-template.md lists it). Parse once, render many times.
//
//   jinja::Template t("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
//   jinja::Value ctx = jinja::Value::new_dict();
//   ctx.dict->set("messages", ...);
//   jinja::Text out = t.render(ctx);   // out.s: the text; out.taint: which bytes came from data
#pragma once

#include <memory>
#include <string_view>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/value.h"

namespace minfer::jinja {

class Template {
 public:
  /// Lexes and parses `source` (whitespace options as Hugging Face renders chat templates).
  /// Throws TemplateError naming the line and the construct for a syntax error or anything
  /// outside the supported subset (an unknown statement, filter or test).
  explicit Template(std::string_view source, const LexOptions& options = {});

  /// Renders with the variables of `context` (a dict). Throws TemplateError naming the line for
  /// a runtime error, including the template's own raise_exception().
  Text render(const Value& context) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace minfer::jinja
