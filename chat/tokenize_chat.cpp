#include "chat/tokenize_chat.h"

namespace minfer::chat {

std::vector<int32_t> tokenize_chat(const tokenizer::Tokenizer& tok, const jinja::Text& rendered) {
  return tok.with_bos(tok.encode_trusted(rendered.s, rendered.taint));
}

}  // namespace minfer::chat
