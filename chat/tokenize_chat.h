// Token ids of a rendered chat, with special tokens only where the template wrote them.
//
// The rendering (chat/chat_template.h) marks every byte that came from the caller's data —
// message content, roles, tool definitions — whatever the template did with it (trimmed, sliced,
// split, joined, JSON-encoded). Tokenization then parses special tokens in the template's own
// text (role headers, separators, the generation prompt, bos_token) and never in data: a special
// token's text that has even one data byte is tokenized as plain text. Apart from that the text
// is tokenized as one string, exactly as Hugging Face tokenizes apply_chat_template's output, so
// ordinary conversations get the same ids as HF.
#pragma once

#include <cstdint>
#include <vector>

#include "chat/jinja/value.h"
#include "tokenizer/tokenizer.h"

namespace minfer::chat {

/// The ids of `rendered`. BOS is prepended when the vocabulary asks for it (add_bos_token)
/// unless the template already wrote bos_token at the start — never twice (llama.cpp's rule).
/// Throws std::invalid_argument when the text is not well-formed UTF-8.
std::vector<int32_t> tokenize_chat(const tokenizer::Tokenizer& tok, const jinja::Text& rendered);

}  // namespace minfer::chat
