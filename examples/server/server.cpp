#include "server.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>

#include "chat/tokenize_chat.h"
#include "common/chat_json.h"
#include "runtime/generate.h"

namespace minfer::server {

using json = nlohmann::ordered_json;  // ordered: tool schemas reach the template in the client's key order

struct Server::Job {
  std::vector<int32_t> prompt;
  SamplerParams sampling;
  GenerateParams gen;
};

namespace {

template <typename T>
T field(const json& req, const char* key, T def) {
  if (!req.contains(key) || req[key].is_null()) return def;
  try {
    return req[key].get<T>();
  } catch (const json::exception&) {
    throw BadRequest(fmt::format("'{}' has the wrong type ({})", key, req[key].type_name()));
  }
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> n{0};
  return fmt::format("{}-{}", prefix, ++n);
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string finish_reason(const GenerateResult& r) {
  return r.stop_reason == "length" || r.stop_reason == "context" ? "length" : "stop";
}

json error_body(const std::string& message, const char* type) {
  return {{"error", {{"message", message}, {"type", type}}}};
}

}  // namespace

Server::Server(examples::Loaded& model, const SessionParams& sp, const ServerParams& p)
    : m_(model),
      params_(p),
      template_(chat::select_chat_template(*model.tok, p.chat_template)),
      session_(*model.model, *model.backend, sp) {
  if (params_.model_name.empty()) {
    params_.model_name = m_.model->hparams().name;
    if (params_.model_name.empty()) params_.model_name = std::filesystem::path(m_.file->name()).stem().string();
  }
}

Server::Job Server::parse(const json& req, bool chat) const {
  if (!req.is_object()) throw BadRequest("the request body must be a JSON object");
  Job job;
  if (chat) {
    if (!req.contains("messages") || !req["messages"].is_array() || req["messages"].empty())
      throw BadRequest("'messages' must be a non-empty array");
    static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    for (const auto& m : req["messages"]) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        throw BadRequest("each message needs a string 'role'");
      const std::string role = m["role"].get<std::string>();
      if (std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char* r) { return role == r; }))
        throw BadRequest(fmt::format("unknown role '{}' (system, developer, user, assistant, tool or function)", role));
      const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
      if (!m.contains("content") && !has_calls) throw BadRequest("each message needs 'content' (or 'tool_calls')");
      if (m.contains("content") && !m["content"].is_string() && !m["content"].is_array() && !m["content"].is_null())
        throw BadRequest("'content' must be a string, an array of parts or null");
    }
    chat::ChatInputs in;
    in.messages = examples::json_to_value(req["messages"]);  // every string is data: never a special token
    if (req.contains("tools") && !req["tools"].is_null()) {
      if (!req["tools"].is_array()) throw BadRequest("'tools' must be an array");
      in.tools = examples::json_to_value(req["tools"]);
    }
    if (req.contains("enable_thinking") && !req["enable_thinking"].is_null()) in.enable_thinking = field(req, "enable_thinking", true);
    if (req.contains("chat_template_kwargs") && !req["chat_template_kwargs"].is_null()) {
      if (!req["chat_template_kwargs"].is_object()) throw BadRequest("'chat_template_kwargs' must be an object");
      for (const auto& [k, v] : req["chat_template_kwargs"].items()) {
        if (k == "enable_thinking" && v.is_boolean()) in.enable_thinking = v.get<bool>();
        else in.extra.emplace_back(k, examples::json_to_value(v));
      }
    }
    in.add_generation_prompt = field(req, "add_generation_prompt", true);
    try {
      job.prompt = chat::tokenize_chat(*m_.tok, template_.render(in));
    } catch (const std::exception& e) {  // the template refused the conversation, or bad UTF-8
      throw BadRequest(e.what());
    }
  } else {
    if (!req.contains("prompt") || !req["prompt"].is_string()) throw BadRequest("'prompt' must be a string");
    const std::string text = req["prompt"].get<std::string>();
    if (text.empty()) throw BadRequest("'prompt' is empty");
    try {
      // As llama-server: special-token text in a raw prompt is parsed.
      job.prompt = m_.tok->with_bos(m_.tok->encode(text, field(req, "parse_special", true)));
    } catch (const std::invalid_argument& e) {
      throw BadRequest(e.what());
    }
  }
  if (job.prompt.empty()) throw BadRequest("the prompt encodes to no tokens");
  if (static_cast<int64_t>(job.prompt.size()) >= session_.n_ctx())
    throw BadRequest(fmt::format("the prompt has {} tokens; the context holds {}", job.prompt.size(), session_.n_ctx()));
  SamplerParams& s = job.sampling;
  s.temp = field(req, "temperature", 1.0f);
  s.top_p = field(req, "top_p", 1.0f);
  s.top_k = field(req, "top_k", 0);
  s.min_p = field(req, "min_p", 0.0f);
  s.repeat_penalty = field(req, "repeat_penalty", 1.0f);
  s.presence_penalty = field(req, "presence_penalty", 0.0f);
  s.frequency_penalty = field(req, "frequency_penalty", 0.0f);
  s.seed = field<uint64_t>(req, "seed", kSeedRandom);
  if (field(req, "n", 1) != 1) throw BadRequest("only 'n': 1 is supported");
  if (!(s.temp >= 0) || !(s.top_p > 0) || !(s.repeat_penalty > 0)) throw BadRequest("sampling parameters out of range");
  job.gen.n_predict = field(req, "max_tokens", params_.n_predict_default);
  if (job.gen.n_predict < 1 || job.gen.n_predict > params_.n_predict_max)
    throw BadRequest(fmt::format("'max_tokens' must be in [1, {}]", params_.n_predict_max));
  if (req.contains("stop") && !req["stop"].is_null()) {
    if (req["stop"].is_string()) job.gen.stop.push_back(req["stop"].get<std::string>());
    else if (req["stop"].is_array())
      for (const auto& st : req["stop"]) {
        if (!st.is_string()) throw BadRequest("'stop' must be a string or an array of strings");
        job.gen.stop.push_back(st.get<std::string>());
      }
    else throw BadRequest("'stop' must be a string or an array of strings");
  }
  return job;
}

GenerateResult Server::run(const Job& job, const std::function<void(std::string_view)>& on_text) {
  std::lock_guard<std::mutex> lk(mu_);
  // Keep the longest cached prefix; at least one prompt token is evaluated to get logits.
  size_t p = 0;
  while (p < cached_.size() && p < job.prompt.size() && cached_[p] == job.prompt[p]) ++p;
  if (p == job.prompt.size()) --p;
  session_.rollback(static_cast<int32_t>(std::min<size_t>(p, static_cast<size_t>(session_.n_past()))));
  p = static_cast<size_t>(session_.n_past());
  cached_.resize(p);
  std::vector<int32_t> fresh(job.prompt.begin() + static_cast<std::ptrdiff_t>(p), job.prompt.end());
  Sampler sampler(job.sampling);
  for (size_t i = 0; i < p; ++i) sampler.accept(job.prompt[i]);
  GenerateResult r;
  try {
    r = generate(session_, *m_.tok, sampler, fresh, job.gen, on_text);
  } catch (...) {
    cached_.clear();
    session_.reset();
    throw;
  }
  cached_.insert(cached_.end(), fresh.begin(), fresh.end());
  cached_.insert(cached_.end(), r.ids.begin(), r.ids.end() - (r.ids.empty() ? 0 : 1));
  cached_.resize(static_cast<size_t>(session_.n_past()));
  r.prompt_ids = job.prompt;
  return r;
}

json Server::complete(const json& req, bool chat) {
  Job job = parse(req, chat);
  GenerateResult r = run(job, nullptr);
  json usage = {{"prompt_tokens", r.prompt_ids.size()}, {"completion_tokens", r.ids.size()},
                {"total_tokens", r.prompt_ids.size() + r.ids.size()}};
  json choice = {{"index", 0}, {"finish_reason", finish_reason(r)}};
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else choice["text"] = r.text;
  json out = {{"id", new_id(chat ? "chatcmpl" : "cmpl")}, {"object", chat ? "chat.completion" : "text_completion"},
              {"created", now_s()}, {"model", params_.model_name}, {"choices", json::array({choice})}, {"usage", usage},
              {"timings", {{"prefill_tok_s", r.prefill_tok_s()}, {"decode_tok_s", r.decode_tok_s()}}}};
  if (field(req, "return_tokens", false)) {  // llama-server's "tokens", plus the prompt's ids
    out["tokens"] = r.ids;
    out["prompt_ids"] = r.prompt_ids;
  }
  return out;
}

void Server::install(httplib::Server& http) {
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json j = {{"object", "list"}, {"data", json::array({{{"id", params_.model_name}, {"object", "model"},
                                                          {"created", now_s()}, {"owned_by", "minfer"}}})}};
    res.set_content(j.dump(), "application/json");
  });
  auto handler = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      json body;
      try {
        body = json::parse(req.body);
      } catch (const json::exception& e) {
        res.status = 400;
        res.set_content(error_body(fmt::format("invalid JSON: {}", e.what()), "invalid_request_error").dump(), "application/json");
        return;
      }
      try {
        if (!field(body, "stream", false)) {
          res.set_content(complete(body, chat).dump(), "application/json");
          return;
        }
        auto job = std::make_shared<Job>(parse(body, chat));
        const std::string id = new_id(chat ? "chatcmpl" : "cmpl");
        const std::string model = params_.model_name;
        res.set_chunked_content_provider("text/event-stream", [this, job, id, model, chat](size_t, httplib::DataSink& sink) {
          auto chunk = [&](const json& delta_or_text, const json& finish) {
            json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", now_s()},
                      {"model", model}};
            json choice = {{"index", 0}, {"finish_reason", finish}};
            if (chat) choice["delta"] = delta_or_text;
            else choice["text"] = delta_or_text;
            c["choices"] = json::array({choice});
            const std::string s = "data: " + c.dump() + "\n\n";
            return sink.write(s.data(), s.size());
          };
          try {
            if (chat) chunk({{"role", "assistant"}}, nullptr);
            GenerateResult r = run(*job, [&](std::string_view text) {
              const bool ok = chat ? chunk({{"content", std::string(text)}}, nullptr) : chunk(std::string(text), nullptr);
              if (!ok) throw std::runtime_error("the client went away");  // stops generating
            });
            chat ? chunk(json::object(), finish_reason(r)) : chunk("", finish_reason(r));
          } catch (const std::exception& e) {
            const std::string s = "data: " + error_body(e.what(), "server_error").dump() + "\n\n";
            sink.write(s.data(), s.size());
          }
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        });
      } catch (const BadRequest& e) {
        res.status = 400;
        res.set_content(error_body(e.what(), "invalid_request_error").dump(), "application/json");
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(error_body(e.what(), "server_error").dump(), "application/json");
      }
    };
  };
  // Unknown routes and wrong methods get a JSON error too (OpenAI clients parse every body).
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const char* msg = res.status == 404 ? "no such endpoint" : res.status == 413 ? "request too large (send Content-Type: application/json)"
                                                                                 : "request failed";
    res.set_content(error_body(fmt::format("{} {}: {}", req.method, req.path, msg), "invalid_request_error").dump(),
                    "application/json");
  });
  http.Post("/v1/completions", handler(false));
  http.Post("/v1/chat/completions", handler(true));
}

}  // namespace minfer::server
