// An OpenAI-compatible HTTP API over one model: /v1/completions, /v1/chat/completions (both
// with "stream": true as server-sent events), /v1/models, /health. Requests run one at a time on
// a single session whose KV cache keeps the longest prefix shared with the previous request.
// Bad requests get HTTP 400 with {"error": {"message", "type"}}; nothing a client sends can
// take the server down.
//
// Prompts are built as llama-server builds them: /v1/completions tokenizes "prompt" with special
// tokens parsed ("parse_special": false turns that off); /v1/chat/completions renders "messages"
// (and "tools", "enable_thinking", "chat_template_kwargs") with the model's chat template, and
// nothing in a message ever becomes a special token (chat/tokenize_chat.h). Text never ends in
// U+FFFD, streamed or not; stop strings are not included (runtime/token_sink.h).
// "return_tokens": true adds "tokens" (the generated ids, as llama-server) and "prompt_ids".
#pragma once

#include <httplib.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/common.h"
#include "runtime/generate.h"

namespace minfer::server {

struct ServerParams {
  int n_predict_default = 256;  ///< max_tokens when a request gives none
  int n_predict_max = 4096;
  std::string model_name;       ///< reported id; default: general.name or the file name
  std::string chat_template;    ///< --chat-template: "chatml", a file, or empty for the model's own
};

/// A request that cannot be served: the message goes back to the client with HTTP 400.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Server {
 public:
  Server(examples::Loaded& model, const SessionParams& sp, const ServerParams& p);

  /// Registers the routes on `http`.
  void install(httplib::Server& http);

  /// The JSON response of a non-streaming request; throws BadRequest. Exposed for tests.
  nlohmann::ordered_json complete(const nlohmann::ordered_json& req, bool chat);

 private:
  struct Job;
  Job parse(const nlohmann::ordered_json& req, bool chat) const;
  GenerateResult run(const Job& job, const std::function<void(std::string_view)>& on_text);

  examples::Loaded& m_;
  ServerParams params_;
  chat::ChatTemplate template_;
  Session session_;
  std::vector<int32_t> cached_;  // tokens the KV cache holds
  std::mutex mu_;
};

}  // namespace minfer::server
