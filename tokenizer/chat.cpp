#include "tokenizer/chat.h"

#include <stdexcept>

namespace minfer::tokenizer {
namespace {

std::string_view lstrip_nl(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_nl(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

bool is_tool_response(std::string_view s) {
  return s.starts_with("<tool_response>") && s.ends_with("</tool_response>");
}

void check_role(const ChatMessage& m) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
    throw std::invalid_argument("unsupported chat role '" + m.role + "' (system, user, assistant or tool)");
  }
}

std::string format_qwen2(std::span<const ChatMessage> msgs, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : msgs) {
    check_role(m);
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Line-by-line transcription of the Qwen3 Jinja template (tools list empty).
std::string format_qwen3(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                         bool enable_thinking) {
  for (const ChatMessage& m : msgs) check_role(m);
  std::string out;
  const size_t n = msgs.size();
  if (n > 0 && msgs[0].role == "system") {
    out += "<|im_start|>system\n" + msgs[0].content + "<|im_end|>\n";
  }
  // Index of the last real user query; assistant turns after it keep their reasoning.
  size_t last_query = n > 0 ? n - 1 : 0;
  for (size_t k = n; k-- > 0;) {
    if (msgs[k].role == "user" && !is_tool_response(msgs[k].content)) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
        const size_t last_close = content.rfind("</think>");
        std::string_view before = rstrip_nl(content.substr(0, close));
        if (const size_t open = before.rfind("<think>"); open != std::string_view::npos) {
          before = before.substr(open + 7);
        }
        reasoning = lstrip_nl(before);
        content = lstrip_nl(content.substr(last_close + 8));
      }
      const bool last = i + 1 == n;
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n";
        out += lstrip_nl(rstrip_nl(reasoning));
        out += "\n</think>\n\n";
        out += lstrip_nl(content);
      } else {
        out += "<|im_start|>assistant\n";
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == n || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace

std::string format_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                          const ChatOptions& options) {
  return options.qwen3 ? format_qwen3(messages, add_generation_prompt, options.enable_thinking)
                       : format_qwen2(messages, add_generation_prompt);
}

ChatOptions chat_options_for(std::string_view architecture, std::string_view chat_template) {
  ChatOptions o;
  o.qwen3 = chat_template.find("<think>") != std::string_view::npos || architecture.starts_with("qwen3");
  return o;
}

}  // namespace minfer::tokenizer
