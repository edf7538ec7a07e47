#include "common/prompt.h"

#include <cctype>
#include <stdexcept>

#include "chat/tokenize_chat.h"

namespace minfer::examples {

std::string process_escapes(std::string_view s) {
  std::string out;
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {  // a trailing backslash stays
      out += s[i];
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case '\\': out += '\\'; break;
      case '"': out += '"'; break;
      case '\'': out += '\''; break;
      default:
        if (e == 'x' && i + 2 < s.size() && hex(s[i + 1]) && hex(s[i + 2])) {
          out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
          i += 2;
        } else {  // unknown (a regex's \d, a path's C:\x): kept as typed
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

std::vector<int32_t> raw_prompt_ids(const tokenizer::Tokenizer& tok, std::string_view text, bool parse_special, bool add_bos) {
  std::vector<int32_t> ids = tok.encode(text, parse_special);
  return add_bos ? tok.with_bos(std::move(ids)) : ids;
}

void add_chat_template_flag(CLI::App& app, std::string& spec) {
  app.add_option("--chat-template,--chat-template-file", spec,
                 "chat template: 'chatml', or a file with a Jinja template (default: the model's "
                 "tokenizer.chat_template, ChatML when the file has none)");
}

std::vector<int32_t> chat_prompt_ids(const chat::ChatTemplate& tpl, const tokenizer::Tokenizer& tok, const chat::ChatInputs& in) {
  return chat::tokenize_chat(tok, tpl.render(in));
}

}  // namespace minfer::examples
