// The Jinja lexer: template source -> text pieces and tags, each tag split into expression
// tokens. Whitespace control follows Jinja2 (jinja2/lexer.py) with the options Hugging Face
// renders chat templates with (trim_blocks=True, lstrip_blocks=True):
//   - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}` all after;
//   - trim_blocks: the first newline after a block tag or comment is removed;
//   - lstrip_blocks: spaces and tabs from the start of a line to a block tag or comment are
//     removed when nothing else precedes the tag on that line (`{%+` keeps them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer::jinja {

struct Token {
  enum class Kind { name, string, integer, floating, op, end };
  Kind kind = Kind::end;
  std::string text;  ///< name, operator, or the decoded string literal
  long long int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct Piece {
  enum class Kind { text, output, statement };  ///< raw text, {{ ... }}, {% ... %}
  Kind kind = Kind::text;
  std::string text;          ///< for text pieces
  std::vector<Token> tokens;  ///< for tags: the tokens inside, ending with Kind::end
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

/// Splits `source` into pieces. Throws TemplateError naming the line for an unterminated tag,
/// comment or string, or a character that starts no token.
std::vector<Piece> lex(std::string_view source, const LexOptions& options = {});

}  // namespace minfer::jinja
