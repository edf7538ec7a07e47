// A model's chat template: which one a program uses, and rendering a conversation with it.
//
// Every chat path (minfer-generate --chat, minfer-chat, the server's /v1/chat/completions,
// speculative decoding) renders through ChatTemplate and tokenizes with tokenize_chat()
// (chat/tokenize_chat.h). The template is the GGUF's `tokenizer.chat_template`; `--chat-template
// chatml|FILE` overrides it; ChatML is the fallback only when the file has none.
//
// Rendering follows Hugging Face's apply_chat_template: the variables are `messages`, `tools`
// (when given), `add_generation_prompt`, `bos_token`, `eos_token`, `enable_thinking` (when set)
// and any extra keyword variables. Every string of the messages and tools is marked as data
// (jinja::Text taint), so the rendering knows which bytes the template wrote.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/template.h"
#include "chat/jinja/value.h"

namespace minfer::tokenizer {
class Tokenizer;
}

namespace minfer::chat {

/// A plain text message; richer ones (tool_calls, reasoning_content, content parts) are passed as
/// jinja values (see message_value / ChatInputs::messages).
struct Message {
  std::string role;  ///< "system", "user", "assistant", "tool", ... (the template decides)
  std::string content;
};

/// The message as the template sees it: {"role": ..., "content": ...}, strings marked as data.
jinja::Value message_value(const Message& m);
/// A list of messages as above.
jinja::Value messages_value(const std::vector<Message>& ms);

struct ChatInputs {
  jinja::Value messages;                 ///< a list of dicts (messages_value, or built from JSON)
  jinja::Value tools;                    ///< a list, or undefined (not passed to the template)
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;   ///< passed only when set (Qwen3: false = no thinking)
  std::vector<std::pair<std::string, jinja::Value>> extra;  ///< more variables (reasoning_effort, ...)
};

class ChatTemplate {
 public:
  /// Parses `source`. Throws jinja::TemplateError (naming the line and the construct) when the
  /// template uses something the engine does not support or has a syntax error.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token, std::string origin);

  /// The generic ChatML template (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n).
  static const std::string& chatml_source();

  /// Renders a conversation. Throws jinja::TemplateError (e.g. the template's own
  /// raise_exception for roles it does not accept).
  jinja::Text render(const ChatInputs& in) const;

  const std::string& source() const { return source_; }
  /// Where the template came from: "the GGUF's tokenizer.chat_template", "ChatML (built in)",
  /// "file PATH" — for messages.
  const std::string& origin() const { return origin_; }

 private:
  std::string source_, bos_, eos_, origin_;
  jinja::Template tpl_;
};

/// The template a program uses for `tok`'s model: `override_spec` "chatml" → the built-in
/// ChatML; another non-empty value → the template in that file; empty → the vocabulary's
/// `tokenizer.chat_template`, or ChatML when the file has none. bos_token / eos_token are the
/// texts of the vocabulary's BOS / EOS tokens. Throws std::runtime_error for an unreadable file
/// and jinja::TemplateError for a template the engine cannot run (both name the source).
ChatTemplate select_chat_template(const tokenizer::Tokenizer& tok, std::string_view override_spec);

}  // namespace minfer::chat
