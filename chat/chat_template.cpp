#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tokenizer/tokenizer.h"

namespace minfer::chat {

jinja::Value message_value(const Message& m) {
  jinja::Value v = jinja::Value::new_dict();
  v.dict->set("role", jinja::tainted_string(m.role));
  v.dict->set("content", jinja::tainted_string(m.content));
  return v;
}

jinja::Value messages_value(const std::vector<Message>& ms) {
  jinja::List l;
  for (const Message& m : ms) l.push_back(message_value(m));
  return jinja::Value::new_list(std::move(l));
}

const std::string& ChatTemplate::chatml_source() {
  static const std::string s =
      "{%- for message in messages -%}"
      "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
      "{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";
  return s;
}

namespace {

// Parses with the origin in the message, so a bad GGUF template says where it came from.
jinja::Template parse_named(const std::string& source, const std::string& origin) {
  try {
    return jinja::Template(source);
  } catch (const jinja::TemplateError& e) {
    throw jinja::TemplateError(origin + ": " + e.what());
  }
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token, std::string origin)
    : source_(std::move(source)),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      origin_(std::move(origin)),
      tpl_(parse_named(source_, origin_)) {}

jinja::Text ChatTemplate::render(const ChatInputs& in) const {
  jinja::Value ctx = jinja::Value::new_dict();
  ctx.dict->set("messages", in.messages.is_undefined() ? jinja::Value::new_list() : in.messages);
  if (!in.tools.is_undefined()) ctx.dict->set("tools", in.tools);
  ctx.dict->set("add_generation_prompt", jinja::Value::boolean(in.add_generation_prompt));
  ctx.dict->set("bos_token", jinja::Value::string(jinja::Text(bos_)));
  ctx.dict->set("eos_token", jinja::Value::string(jinja::Text(eos_)));
  if (in.enable_thinking) ctx.dict->set("enable_thinking", jinja::Value::boolean(*in.enable_thinking));
  for (const auto& [k, v] : in.extra) ctx.dict->set(k, v);
  try {
    return tpl_.render(ctx);
  } catch (const jinja::TemplateError& e) {
    throw jinja::TemplateError(origin_ + ": " + e.what());
  }
}

ChatTemplate select_chat_template(const tokenizer::Tokenizer& tok, std::string_view override_spec) {
  auto text_of = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  const std::string bos = text_of(tok.bos_id()), eos = text_of(tok.eos_id());
  if (override_spec == "chatml") return ChatTemplate(ChatTemplate::chatml_source(), bos, eos, "ChatML (built in)");
  if (!override_spec.empty()) {
    const std::string path(override_spec);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw std::runtime_error("chat template file '" + path + "' is a directory (--chat-template chatml|FILE)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read chat template file '" + path + "' (--chat-template chatml|FILE)");
    std::stringstream ss;
    ss << in.rdbuf();
    return ChatTemplate(ss.str(), bos, eos, "chat template file '" + path + "'");
  }
  const std::string& gguf_tpl = tok.vocab().chat_template;
  if (gguf_tpl.empty()) return ChatTemplate(ChatTemplate::chatml_source(), bos, eos, "ChatML (the model file has no chat template)");
  return ChatTemplate(gguf_tpl, bos, eos, "the model's tokenizer.chat_template");
}

}  // namespace minfer::chat
