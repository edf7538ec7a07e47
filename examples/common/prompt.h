// Turning what a user typed into prompt token ids, the way llama.cpp's programs do: escape
// processing of -p / --stop / --system, raw prompts with special tokens parsed, and chat
// conversations rendered with the model's own template (chat/chat_template.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace minfer::examples {

/// llama.cpp's -e / --escape processing (common's string_process_escapes): \n \r \t \\ \" \'
/// and \xNN; any other backslash (an unknown escape, \x without two hex digits, a trailing one)
/// is kept as typed, so a regex or a Windows path survives.
std::string process_escapes(std::string_view s);

/// A raw prompt's ids: special tokens parsed unless `parse_special` is false (--no-parse-special),
/// BOS as the file says (never twice; Tokenizer::with_bos) unless `add_bos` is false.
std::vector<int32_t> raw_prompt_ids(const tokenizer::Tokenizer& tok, std::string_view text, bool parse_special,
                                    bool add_bos = true);

/// --chat-template chatml|FILE.
void add_chat_template_flag(CLI::App& app, std::string& spec);

/// A conversation's ids: rendered with `tpl`, special tokens only where the template wrote them
/// (chat/tokenize_chat.h). Throws jinja::TemplateError when the template refuses the
/// conversation (its raise_exception, e.g. roles that do not alternate).
std::vector<int32_t> chat_prompt_ids(const chat::ChatTemplate& tpl, const tokenizer::Tokenizer& tok,
                                     const chat::ChatInputs& in);

}  // namespace minfer::examples
