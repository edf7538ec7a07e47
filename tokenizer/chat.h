// ChatML prompt formatting for Qwen2 and Qwen3, written out in C++ (no Jinja interpreter).
//
// Qwen3 style reproduces the Qwen3 `tokenizer.chat_template` (the one in the fixture GGUFs) for
// conversations without tools:
//   - a leading system message: "<|im_start|>system\n{content}<|im_end|>\n"
//   - user messages, and system messages that are not first: "<|im_start|>{role}\n{content}<|im_end|>\n"
//   - assistant messages: "<|im_start|>assistant\n{content}<|im_end|>\n", where a "<think>...</think>"
//     block in the content is removed for turns before the last user query and kept, normalized to
//     "<think>\n{reasoning}\n</think>\n\n{answer}", for turns after it (as the template does);
//   - tool messages: grouped into one user turn of "\n<tool_response>\n{content}\n</tool_response>";
//   - generation prompt: "<|im_start|>assistant\n", followed by "<think>\n\n</think>\n\n" when
//     enable_thinking is false.
// Qwen2 style is plain ChatML: "<|im_start|>{role}\n{content}<|im_end|>\n" per message and
// "<|im_start|>assistant\n" as the prompt (no default system prompt is injected; Qwen2.5's own
// template adds "You are Qwen, created by Alibaba Cloud..." when there is none — pass it
// explicitly if wanted).
//
// The output contains special-token text; encode it with parse_special = true.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace minfer::tokenizer {

struct ChatMessage {
  std::string role;  ///< "system", "user", "assistant" or "tool"
  std::string content;
};

struct ChatOptions {
  bool enable_thinking = true;  ///< Qwen3 only: false appends an empty think block to the prompt
  bool qwen3 = true;            ///< Qwen3 template rules; false: plain ChatML (Qwen2)
};

/// Formats `messages` (see the file comment). Throws std::invalid_argument for a role other than
/// the four above (the Jinja template would silently drop such a message).
std::string format_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                          const ChatOptions& options = {});

/// Chooses the style from file metadata: Qwen3 when the chat template mentions "<think>" (the
/// fixture Qwen2 models ship the Qwen3 template, and the template is what the model was trained
/// with), otherwise Qwen3 when `architecture` starts with "qwen3", otherwise Qwen2.
ChatOptions chat_options_for(std::string_view architecture, std::string_view chat_template);

}  // namespace minfer::tokenizer
