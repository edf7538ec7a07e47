#include "chat/jinja/template.h"

#include "chat/jinja/interpreter.h"
#include "chat/jinja/parser.h"

namespace minfer::jinja {

Template::Template(std::string_view source, const LexOptions& options)
    : body_(std::make_shared<const Body>(parse(lex(source, options)))) {}

Text Template::render(const Value& context) const {
  Interpreter in(*body_, context);
  return in.render();
}

}  // namespace minfer::jinja
