#include "api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "chat/tokenize_chat.h"
#include "common/chat_json.h"
#include "tokenizer/unicode.h"

namespace minfer::server {
namespace {

const json* get(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

std::optional<bool> opt_bool(const json& body, const char* key) {
  const json* v = get(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw BadRequest(fmt::format("'{}' must be a boolean, got {}", key, shown(*v)));
  return v->get<bool>();
}

bool is_integer(const json& v) { return v.is_number_integer() || v.is_number_unsigned(); }

std::optional<int64_t> opt_int(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = get(body, key);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    x = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) && std::floor(v->get<double>()) == v->get<double>() &&
             std::abs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());  // 16.0 is an integer
  } else {
    throw BadRequest(fmt::format("'{}' must be an integer, got {}", key, shown(*v)));
  }
  if (x < lo || x > hi) throw BadRequest(fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, x));
  return x;
}

std::optional<double> opt_num(const json& body, const char* key, double lo, double hi, bool lo_open = false) {
  const json* v = get(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw BadRequest(fmt::format("'{}' must be a number, got {}", key, shown(*v)));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    throw BadRequest(fmt::format("'{}' must be in {}{}, {}], got {}", key, lo_open ? "(" : "[", lo, hi, shown(*v)));
  return x;
}

// A prompt that cannot fit the context is refused before it is tokenized when its bytes alone
// prove it (every token covers at most max_token_bytes bytes; 4x slack for NFC composition).
void check_text_fits(size_t bytes, const ApiLimits& lim) {
  const auto most = static_cast<uint64_t>(lim.n_ctx_seq) * lim.max_token_bytes * 4;
  if (bytes > most)
    throw BadRequest(fmt::format("the prompt ({} bytes, so more than {} tokens) does not fit the context of {} tokens", bytes,
                                 most / (lim.max_token_bytes * 4), lim.n_ctx_seq));
}

// `which`: how the message names the prompt ("the prompt", "'prompt'[1]" of an array).
void check_prompt(const std::vector<int32_t>& ids, const ApiLimits& lim, const std::string& which = "the prompt") {
  if (ids.empty()) throw BadRequest(fmt::format("{} is empty (it encodes to no tokens)", which));
  // A prompt may fill the context: its last position's logits give one token, which is returned
  // without being stored (as a generation's last token always is), so prompt + completion is at
  // most the context + 1 whatever the prompt's length.
  if (static_cast<int64_t>(ids.size()) > lim.n_ctx_seq)
    throw BadRequest(fmt::format("{} has {} tokens but the context holds {} (raise -c or shorten the prompt)", which,
                                 ids.size(), lim.n_ctx_seq));
}

// "an integer", "a float", ...: what a refused element is, next to its value.
std::string kind(const json& v) {
  if (is_integer(v)) return "an integer";
  if (v.is_number()) return "a float";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_boolean()) return "a boolean";
  return "null";
}

std::vector<int32_t> text_prompt(const std::string& text, bool parse_special, const tokenizer::Tokenizer& tok,
                                 const ApiLimits& lim, bool bos = true) {
  check_text_fits(text.size(), lim);
  try {
    const auto ids = tok.encode(text, parse_special);
    return bos ? tok.with_bos(ids) : ids;
  } catch (const std::invalid_argument& e) {
    throw BadRequest(fmt::format("the prompt cannot be tokenized: {}", e.what()));
  }
}

// One prompt from an array of token ids and strings, concatenated in order (llama-server's mixed
// form, [12, 34, "text", 56]); the strings are tokenized, with BOS only when the first element
// is one (as llama-server's tokenize_mixed). `where` names the array in messages ("'prompt'").
std::vector<int32_t> mixed_prompt(const json& arr, const std::string& where, bool parse_special,
                                  const tokenizer::Tokenizer& tok, const ApiLimits& lim) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    if (t.is_string()) {
      const auto part = text_prompt(t.get<std::string>(), parse_special, tok, lim, /*bos=*/i == 0);
      ids.insert(ids.end(), part.begin(), part.end());
      continue;
    }
    if (!is_integer(t))
      throw BadRequest(fmt::format("{}[{}] must be a token id (an integer) or a string, got {} ({})", where, i, shown(t), kind(t)));
    const int64_t id = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX)) : t.get<int64_t>();
    if (id < 0 || id >= lim.n_vocab)
      throw BadRequest(fmt::format("{}[{}]: token id {} is outside the vocabulary [0, {})", where, i, id, lim.n_vocab));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// The completion prompt shapes, as llama-server's tokenize_input_prompts reads them: a string;
// an array holding a number: one prompt of token ids, optionally mixed with strings
// ([12, 34, "text"]); any other array: one prompt per element, each a string or an array of
// token ids (mixed or not).
std::vector<std::vector<int32_t>> completion_prompts(const json& body, const tokenizer::Tokenizer& tok, const ApiLimits& lim) {
  const json* p = get(body, "prompt");
  if (!p) throw BadRequest("'prompt' is required: a string, an array of strings, token ids or arrays of token ids");
  const bool parse_special = opt_bool(body, "parse_special").value_or(true);  // as llama-server
  std::vector<std::vector<int32_t>> out;
  if (p->is_string()) {
    out.push_back(text_prompt(p->get<std::string>(), parse_special, tok, lim));
  } else if (p->is_array()) {
    if (p->empty()) throw BadRequest("'prompt' is an empty array");
    if (std::any_of(p->begin(), p->end(), [](const json& e) { return e.is_number(); })) {
      out.push_back(mixed_prompt(*p, "'prompt'", parse_special, tok, lim));
    } else {
      if (static_cast<int64_t>(p->size()) > lim.max_outputs)
        throw BadRequest(fmt::format("'prompt' holds {} prompts; the server takes at most {} completions per request",
                                     p->size(), lim.max_outputs));
      for (size_t i = 0; i < p->size(); ++i) {
        const json& e = (*p)[i];
        if (e.is_string()) out.push_back(text_prompt(e.get<std::string>(), parse_special, tok, lim));
        else if (e.is_array()) out.push_back(mixed_prompt(e, fmt::format("'prompt'[{}]", i), parse_special, tok, lim));
        else
          throw BadRequest(fmt::format("'prompt'[{}] must be a string or an array of token ids (and strings), got {} ({})", i,
                                       shown(e), kind(e)));
      }
    }
  } else {
    throw BadRequest(fmt::format("'prompt' must be a string, an array of strings, token ids or arrays of token ids, got {}",
                                 shown(*p)));
  }
  for (size_t i = 0; i < out.size(); ++i)
    check_prompt(out[i], lim, out.size() > 1 ? fmt::format("'prompt'[{}]", i) : std::string("the prompt"));
  return out;
}

// OpenAI content parts: [{"type": "text", "text": "..."}] becomes the text of the parts joined
// by newlines (llama-server's rule), since templates read content as a string.
// An assistant turn that only calls tools has "content": null or no content at all (what OpenAI
// SDKs send back in a tool-call round trip); templates such as Qwen's concatenate or search the
// content, so it becomes "" (llama-server's rule for templates that need a string).
json flatten_content(const json& messages) {
  json out = messages;
  for (json& m : out) {
    // OpenAI's newer roles, in the names chat templates know (llama-server maps them the same way):
    // `developer` replaced `system`, `function` is the older `tool`. Templates that render only
    // system/user/assistant/tool would otherwise drop those messages without a word.
    if (m["role"] == "developer") m["role"] = "system";
    if (m["role"] == "function") m["role"] = "tool";
    if (m["role"] == "assistant" && (!m.contains("content") || m["content"].is_null())) m["content"] = "";
    auto it = m.find("content");
    if (it == m.end() || !it->is_array()) continue;
    std::string text;
    bool first = true;
    for (const json& part : *it) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        throw BadRequest("each content part must be an object with a string 'type'");
      const std::string type = part["type"].get<std::string>();
      if (type != "text" && type != "input_text")
        throw BadRequest(fmt::format("content parts of type '{}' are not supported (only text)", type));
      if (!part.contains("text") || !part["text"].is_string()) throw BadRequest("a text content part needs a string 'text'");
      if (!first) text += '\n';
      text += part["text"].get<std::string>();
      first = false;
    }
    *it = text;
  }
  return out;
}

std::vector<int32_t> chat_prompt(const json& body, const tokenizer::Tokenizer& tok, const ApiLimits& lim,
                                 const RenderChat& render) {
  const json* msgs = get(body, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty()) throw BadRequest("'messages' must be a non-empty array");
  // Every message costs the template at least one token, so more messages than the context holds
  // never fit; refused before they are converted and rendered (~1.4 KB of memory each).
  if (msgs->size() > static_cast<size_t>(std::max(lim.n_ctx_seq, 1)))
    throw BadRequest(fmt::format("'messages' holds {} messages; a conversation that fits the context ({} tokens) has fewer",
                                 msgs->size(), lim.n_ctx_seq));
  static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw BadRequest(fmt::format("messages[{}] needs a string 'role'", i));
    const std::string role = m["role"].get<std::string>();
    if (std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char* r) { return role == r; }))
      throw BadRequest(fmt::format("messages[{}]: unknown role '{}' (system, developer, user, assistant, tool or function)", i, role));
    const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    // OpenAI: content is required, and may be null (or absent) only for an assistant turn (one
    // that calls tools). Anything else would reach the template as null and fail there with a
    // message about the template's internals.
    const bool no_content = !m.contains("content") || m["content"].is_null();
    if (no_content && role != "assistant")
      throw BadRequest(fmt::format("messages[{}] ({}): 'content' {}; it must be a string or an array of text parts (only an "
                                   "assistant message may have null or no content)",
                                   i, role, m.contains("content") ? "is null" : "is missing"));
    if (no_content && !has_calls && !m.contains("content"))
      throw BadRequest(fmt::format("messages[{}] (assistant) needs 'content' (or 'tool_calls')", i));
    if (!no_content && !m["content"].is_string() && !m["content"].is_array())
      throw BadRequest(fmt::format("messages[{}] ({}): 'content' must be a string{}, got {}", i, role,
                                   role == "assistant" ? ", an array of text parts or null" : " or an array of text parts",
                                   shown(m["content"])));
  }
  json conv = flatten_content(*msgs);
  // llama-server's assistant prefill: the last message, an assistant's, is the start of the reply.
  // A turn that calls tools is complete as it is (dropping it would lose its calls).
  std::optional<std::string> prefill;
  const json& last = conv.back();
  if (lim.prefill_assistant && last["role"] == "assistant" && !(last.contains("tool_calls") && !last["tool_calls"].is_null())) {
    if (conv.size() > 1 && conv[conv.size() - 2]["role"] == "assistant")
      throw BadRequest("two assistant messages end the conversation; only the last one can be continued");
    prefill = last["content"].is_string() ? last["content"].get<std::string>() : std::string();
    conv.erase(conv.size() - 1);
  }
  chat::ChatInputs in;
  in.messages = examples::json_to_value(conv);  // every string is data: never a special token
  // tool_choice: "auto" (the default) hands the tools to the template, which describes them to
  // the model; "none" keeps them from it, so the model is not told it could call them. Forcing a
  // call ("required", a named function) needs constrained decoding, which minfer does not have:
  // refused rather than ignored.
  // The deprecated `functions` / `function_call` (the API's earlier spelling) are read as
  // `tools` / `tool_choice`.
  const json* tc = get(body, "tool_choice");
  const json* tools = get(body, "tools");
  const char* tc_name = "tool_choice";
  json legacy_tools;
  if (const json* fc = get(body, "function_call")) {
    if (tc) throw BadRequest("give 'tool_choice' or the deprecated 'function_call', not both");
    tc = fc;
    tc_name = "function_call";
  }
  if (const json* fs = get(body, "functions")) {
    if (tools) throw BadRequest("give 'tools' or the deprecated 'functions', not both");
    if (!fs->is_array()) throw BadRequest("'functions' must be an array");
    legacy_tools = json::array();
    for (const json& f : *fs) legacy_tools.push_back({{"type", "function"}, {"function", f}});
    tools = &legacy_tools;
  }
  bool use_tools = true;
  if (tc) {
    if (tc->is_string() && (*tc == "none" || *tc == "auto")) {
      use_tools = *tc == "auto";
    } else if (tc->is_string() && *tc == "required") {
      throw BadRequest(fmt::format("'{}' \"required\" is not supported (only \"auto\" and \"none\")", tc_name));
    } else if (tc->is_object()) {
      throw BadRequest(fmt::format("'{}' naming a function ({}) is not supported (only \"auto\" and \"none\")", tc_name, shown(*tc)));
    } else {
      throw BadRequest(fmt::format("'{}' must be \"auto\" or \"none\", got {}", tc_name, shown(*tc)));
    }
  }
  if (tools) {
    if (!tools->is_array()) throw BadRequest("'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const json* f = t.is_object() ? get(t, "function") : nullptr;
      if (!t.is_object() || (t.contains("type") && t["type"] != "function") || !f || !f->is_object() ||
          !f->contains("name") || !(*f)["name"].is_string())
        throw BadRequest(fmt::format("tools[{}] must be {{\"type\": \"function\", \"function\": {{\"name\": ..., ...}}}}, got {}",
                                     i, shown(t)));
    }
    if (use_tools) in.tools = examples::json_to_value(*tools);
  }
  if (auto t = opt_bool(body, "enable_thinking")) in.enable_thinking = *t;
  if (const json* kw = get(body, "chat_template_kwargs")) {
    if (!kw->is_object()) throw BadRequest("'chat_template_kwargs' must be an object");
    for (const auto& [k, v] : kw->items()) {
      // The variables the request itself defines are not template options: a kwarg named
      // `messages` would replace the checked conversation.
      for (const char* own : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
        if (k == own)
          throw BadRequest(fmt::format("'chat_template_kwargs' cannot set '{}': the request defines it", k));
      if (k == "enable_thinking" && v.is_boolean()) in.enable_thinking = v.get<bool>();
      else in.extra.emplace_back(k, examples::json_to_value(v));
    }
  }
  in.add_generation_prompt = prefill || opt_bool(body, "add_generation_prompt").value_or(true);
  jinja::Text text;
  try {
    text = render(in);
  } catch (const std::exception& e) {  // the template refused the conversation
    throw BadRequest(fmt::format("the chat template refused the conversation: {}", e.what()));
  }
  if (prefill) text.append_tainted(*prefill, true);
  check_text_fits(text.s.size(), lim);
  std::vector<int32_t> ids;
  try {
    ids = chat::tokenize_chat(tok, text);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(fmt::format("the conversation cannot be tokenized: {}", e.what()));
  }
  check_prompt(ids, lim);
  return ids;
}

float finite_logprob(float x) { return std::isfinite(x) ? x : -9999.0f; }  // OpenAI's floor

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

JsonShape json_shape(std::string_view text) {
  JsonShape shape;
  std::vector<std::pair<bool, size_t>> open;  // per open container: is an object, its commas
  bool in_string = false, escape = false;
  for (char c : text) {
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      open.emplace_back(c == '{', 0);
      shape.depth = std::max(shape.depth, static_cast<int>(open.size()));
    } else if (c == ']' || c == '}') {
      if (open.empty()) continue;  // malformed: the parser says so
      if (open.back().first) shape.widest_object = std::max(shape.widest_object, open.back().second + 1);
      open.pop_back();
    } else if (c == ',' && !open.empty()) {
      ++open.back().second;
    }
  }
  return shape;
}

Job parse_job(const json& body, bool chat, const tokenizer::Tokenizer& tok, const ApiLimits& lim, const RenderChat& render) {
  if (!body.is_object()) throw BadRequest("the request body must be a JSON object");
  Job job;
  job.chat = chat;
  if (const json* m = get(body, "model"); m && !m->is_string()) throw BadRequest("'model' must be a string");
  // Fields minfer does not implement are refused rather than silently ignored.
  if (opt_bool(body, "echo").value_or(false)) throw BadRequest("'echo' is not supported");
  if (opt_int(body, "best_of", 0, INT32_MAX).value_or(1) > 1) throw BadRequest("'best_of' > 1 is not supported");
  if (get(body, "suffix")) throw BadRequest("'suffix' is not supported");
  if (const json* lb = get(body, "logit_bias"); lb && !(lb->is_object() && lb->empty()))
    throw BadRequest("'logit_bias' is not supported");
  if (const json* rf = get(body, "response_format")) {
    if (!rf->is_object() || (rf->contains("type") && (*rf)["type"] != "text"))
      throw BadRequest("'response_format' other than {\"type\": \"text\"} is not supported");
  }

  job.prompts = chat ? std::vector<std::vector<int32_t>>{chat_prompt(body, tok, lim, render)} : completion_prompts(body, tok, lim);

  job.n = static_cast<int32_t>(opt_int(body, "n", 1, INT32_MAX).value_or(1));
  if (job.n > lim.n_parallel)
    throw BadRequest(fmt::format("'n' is {} but the server runs at most {} sequences at once (-np)", job.n, lim.n_parallel));
  if (static_cast<int64_t>(job.prompts.size()) * job.n > lim.max_outputs)
    throw BadRequest(fmt::format("{} prompts x n = {} asks for {} completions; the server takes at most {} per request",
                                 job.prompts.size(), job.n, job.prompts.size() * static_cast<size_t>(job.n), lim.max_outputs));
  job.stream = opt_bool(body, "stream").value_or(false);
  if (const json* so = get(body, "stream_options")) {
    if (!so->is_object()) throw BadRequest("'stream_options' must be an object");
    if (!job.stream) throw BadRequest("'stream_options' is only allowed when 'stream' is true");
    job.include_usage = opt_bool(*so, "include_usage").value_or(false);
  }
  job.return_tokens = opt_bool(body, "return_tokens").value_or(false);
  job.cache_prompt = opt_bool(body, "cache_prompt").value_or(true);

  SamplerParams& s = job.sampling;
  s = lim.sampling;
  s.temp = static_cast<float>(opt_num(body, "temperature", 0, 1e6).value_or(s.temp));
  s.top_p = static_cast<float>(opt_num(body, "top_p", 0, 1, true).value_or(s.top_p));
  s.top_k = static_cast<int32_t>(opt_int(body, "top_k", -1, INT32_MAX).value_or(s.top_k));
  s.min_p = static_cast<float>(opt_num(body, "min_p", 0, 1).value_or(s.min_p));
  s.presence_penalty = static_cast<float>(opt_num(body, "presence_penalty", -2, 2).value_or(s.presence_penalty));
  s.frequency_penalty = static_cast<float>(opt_num(body, "frequency_penalty", -2, 2).value_or(s.frequency_penalty));
  s.repeat_penalty = static_cast<float>(opt_num(body, "repeat_penalty", 0, 1e6, true).value_or(s.repeat_penalty));
  s.repeat_last_n = static_cast<int32_t>(opt_int(body, "repeat_last_n", -1, INT32_MAX).value_or(s.repeat_last_n));
  if (auto seed = opt_int(body, "seed", INT64_MIN, INT64_MAX)) s.seed = *seed < 0 ? kSeedRandom : static_cast<uint64_t>(*seed);

  // max_completion_tokens (chat), max_tokens, llama-server's n_predict: -1 or absent is "until
  // the context ends".
  std::optional<int64_t> max;
  for (const char* key : {"n_predict", "max_tokens", "max_completion_tokens"})
    if (auto v = opt_int(body, key, -1, INT32_MAX)) {
      if (*v == 0) throw BadRequest(fmt::format("'{}' must be >= 1 (or -1: until the context ends), got 0", key));
      max = v;
    }
  job.gen.n_predict = static_cast<int32_t>(max.value_or(lim.n_predict));
  job.gen.stop_at_eog = !opt_bool(body, "ignore_eos").value_or(false);
  if (const json* st = get(body, "stop")) {
    if (st->is_string()) {
      job.gen.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      if (st->size() > 64) throw BadRequest(fmt::format("'stop' holds {} strings; at most 64", st->size()));
      for (const json& x : *st) {
        if (!x.is_string()) throw BadRequest("'stop' must be a string or an array of strings");
        job.gen.stop.push_back(x.get<std::string>());
      }
    } else {
      throw BadRequest("'stop' must be a string or an array of strings");
    }
  }
  constexpr int64_t kMaxTop = 20;
  if (chat) {
    const bool lp = opt_bool(body, "logprobs").value_or(false);
    const auto top = opt_int(body, "top_logprobs", 0, kMaxTop);
    if (top && !lp) throw BadRequest("'top_logprobs' needs 'logprobs': true");
    if (lp) job.n_logprobs = static_cast<int32_t>(top.value_or(0));
  } else if (const json* lp = get(body, "logprobs")) {
    if (lp->is_boolean()) job.n_logprobs = lp->get<bool>() ? 0 : -1;
    else job.n_logprobs = static_cast<int32_t>(*opt_int(body, "logprobs", 0, kMaxTop));
  }
  return job;
}

std::string finish_reason(const GenerateResult& r) {
  return r.stop_reason == "eog" || r.stop_reason == "stop" ? "stop" : "length";
}

size_t logprobs_in_text(std::span<const TokenLogprob> lps, size_t text_bytes, size_t* lp_bytes,
                        const tokenizer::Tokenizer& tok) {
  size_t k = 0;
  for (; k < lps.size() && *lp_bytes < text_bytes; ++k) *lp_bytes += tok.token_to_piece(lps[k].id, true).size();
  return k;
}

std::span<const TokenLogprob> shown_logprobs(const GenerateResult& r, const tokenizer::Tokenizer& tok) {
  std::span<const TokenLogprob> lps = r.logprobs;
  if (r.stop_reason == "eog" && !lps.empty() && tok.is_eog(lps.back().id)) lps = lps.first(lps.size() - 1);
  if (r.stop_reason == "stop") {
    size_t at = 0;
    lps = lps.first(logprobs_in_text(lps, r.text.size(), &at, tok));
  }
  return lps;
}

size_t TextOffset::next(std::string_view piece) {
  // A character begun before this token (its bytes pending) begins before it, whatever it
  // becomes: completed, or one U+FFFD for its maximal ill-formed part.
  const size_t at = chars + (pending.empty() ? 0 : 1);
  std::string bytes = std::move(pending);
  bytes.append(piece);
  pending.clear();
  for (size_t i = 0; i < bytes.size();) {
    const tokenizer::Utf8Scan sc = tokenizer::utf8_scan(bytes, i);
    if (sc.kind == tokenizer::Utf8Scan::incomplete) {
      pending = bytes.substr(i);
      break;
    }
    ++chars;  // a character, or the U+FFFD of an ill-formed part
    i += sc.len;
  }
  return at;
}

json logprobs_json(std::span<const TokenLogprob> lps, bool chat, const tokenizer::Tokenizer& tok, TextOffset* offset) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& lp : lps) {
      const std::string& piece = tok.token_to_piece(lp.id);
      json top = json::array();
      for (const auto& [id, l] : lp.top) {
        const std::string& p = tok.token_to_piece(id);
        top.push_back({{"token", p}, {"logprob", finite_logprob(l)}, {"bytes", bytes_of(p)}});
      }
      content.push_back({{"token", piece}, {"logprob", finite_logprob(lp.logprob)}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    tokens.push_back(tok.token_to_piece(lp.id));
    token_lps.push_back(finite_logprob(lp.logprob));
    json top = json::object();
    for (const auto& [id, l] : lp.top) top[tok.token_to_piece(id)] = finite_logprob(l);
    tops.push_back(top);
    offsets.push_back(offset->next(tok.token_to_piece(lp.id, /*skip_special=*/true)));
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json usage_json(const Job& job, std::span<const GenerateResult> outputs) {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (const auto& p : job.prompts) prompt += static_cast<int64_t>(p.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    completion += static_cast<int64_t>(outputs[i].ids.size());
    cached += outputs[i].n_prompt_cached;  // only a prompt's first choice evaluates it
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json timings_json(std::span<const GenerateResult> outputs) {
  int64_t prompt_n = 0, cache_n = 0, predicted_n = 0;
  double prompt_ms = 0, predicted_ms = 0;
  for (const GenerateResult& r : outputs) {
    prompt_n += r.n_prompt_eval;
    cache_n += r.n_prompt_cached;
    predicted_n += static_cast<int64_t>(r.ids.size());
    prompt_ms = std::max(prompt_ms, r.prefill_ms);
    predicted_ms = std::max(predicted_ms, r.decode_ms);
  }
  return {{"cache_n", cache_n},
          {"prompt_n", prompt_n},
          {"prompt_ms", prompt_ms},
          {"prompt_per_second", prompt_ms > 0 ? static_cast<double>(prompt_n) * 1000.0 / prompt_ms : 0.0},
          {"predicted_n", predicted_n},
          {"predicted_ms", predicted_ms},
          {"predicted_per_second", predicted_ms > 0 ? static_cast<double>(predicted_n) * 1000.0 / predicted_ms : 0.0}};
}

json completion_json(const Job& job, std::span<const GenerateResult> outputs, const ResponseMeta& meta,
                     const tokenizer::Tokenizer& tok) {
  json choices = json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const GenerateResult& r = outputs[i];
    json c = {{"index", i}};
    if (job.chat) c["message"] = {{"role", "assistant"}, {"content", r.text}};
    else c["text"] = r.text;
    TextOffset offset;
    c["logprobs"] = job.n_logprobs >= 0 ? logprobs_json(shown_logprobs(r, tok), job.chat, tok, &offset) : json(nullptr);
    c["finish_reason"] = finish_reason(r);
    if (job.return_tokens) c["tokens"] = r.ids;
    choices.push_back(std::move(c));
  }
  json out = {{"id", meta.id},
              {"object", job.chat ? "chat.completion" : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", choices},
              {"usage", usage_json(job, outputs)},
              {"timings", timings_json(outputs)}};
  if (job.return_tokens) {
    out["tokens"] = outputs.empty() ? json::array() : json(outputs[0].ids);  // llama-server's field (first choice)
    out["prompt_ids"] = job.prompts.size() == 1 ? json(job.prompts[0]) : json(job.prompts);
  }
  return out;
}

json chunk_json(const Job& job, const ResponseMeta& meta, int32_t index, const std::string& text,
                std::span<const TokenLogprob> lps, const json& finish, bool role, const tokenizer::Tokenizer& tok,
                TextOffset* offset) {
  json c = {{"index", index}};
  if (job.chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty() || finish.is_null()) delta["content"] = text;
    c["delta"] = delta;
  } else {
    c["text"] = text;
  }
  c["logprobs"] = job.n_logprobs >= 0 && !lps.empty() ? logprobs_json(lps, job.chat, tok, offset) : json(nullptr);
  c["finish_reason"] = finish;
  json out = {{"id", meta.id},
              {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", json::array({c})}};
  if (job.include_usage) out["usage"] = nullptr;
  return out;
}

json error_json(const std::string& message, int status) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 503 ? "unavailable_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return {{"error", {{"message", message}, {"type", type}, {"code", status}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace minfer::server
