// minfer-server: an OpenAI-compatible HTTP API over one model, serving many clients at once.
//
// Endpoints (docs/server.md has the shapes): POST /v1/completions and /v1/chat/completions (also
// without /v1; "stream": true sends server-sent events), GET /v1/models, /health, /metrics
// (Prometheus text), POST /tokenize and /detokenize (llama-server's shapes).
//
// Requests run through the Engine (engine.h): one thread owns the model and steps a Scheduler
// over n_parallel slots (continuous batching: a request joins the running batch at the next
// forward pass), full KV blocks are shared by prefix (prefix caching), a client that disconnects
// is noticed before the next step and its slot and blocks are freed, and requests beyond the
// slots wait in a bounded queue (full: 503 with Retry-After).
//
// Prompts are built as llama-server builds them: /v1/completions tokenizes a string prompt with
// special tokens parsed ("parse_special": false turns that off); /v1/chat/completions renders
// "messages" (and "tools", "enable_thinking", "chat_template_kwargs") with the model's chat
// template, and nothing in a message ever becomes a special token (chat/tokenize_chat.h). Text
// never ends in U+FFFD, streamed or not; stop strings are not included (runtime/token_sink.h).
//
// Any origin may call the API from a browser (CORS, as llama-server): every response allows it
// and OPTIONS preflights get 204 without the API key.
//
// Bad requests get 400 with {"error": {"message", "type", "code"}}: a body over --max-body
// (413, refused before it is read), nesting deeper than 64, malformed JSON, wrong types or
// ranges, a prompt longer than the context (the message gives both lengths), n above the slots.
// Nothing a client sends can take the server down.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "api.h"
#include "chat/chat_template.h"
#include "common/common.h"
#include "engine.h"
#include "http.h"

namespace minfer::server {

struct ServerParams {
  std::string model_name;     ///< reported id; default: general.name or the file name
  std::string chat_template;  ///< --chat-template: "chatml", a file, or empty for the model's own
  EngineParams engine;        ///< -np, --queue, --timeout, --no-cache-prompt
  std::string api_key;        ///< --api-key: every endpoint but /health (and CORS preflights) needs "Authorization: Bearer KEY"
  size_t max_body = size_t{8} << 20;  ///< --max-body: larger bodies get 413 unread
  int threads_http = 0;       ///< --threads-http; 0: n_parallel + queue + 8 (a waiting request holds a thread)
  bool access_log = true;     ///< one line per request (method, path, status, tokens, ms)
  bool prefill_assistant = true;  ///< a final assistant message is the reply's start (ApiLimits)
  std::function<void(const std::string&)> log;  ///< where access-log lines go; null: stderr
  /// Defaults for fields a request leaves out: llama-server's (temperature 0.8, top-k 40, top-p
  /// 0.95, min-p 0.05: SamplerParams' defaults). Unfiltered sampling over a 152k vocabulary costs
  /// the H200 host ~5 ms a 16-row step (docs/perf/2026-12-02-server-load.md).
  SamplerParams sampling;
  int32_t n_predict = -1;     ///< max_tokens when a request gives none; -1: until the context ends
};

class Server {
 public:
  /// Loads nothing: `model` is loaded already. Creates the engine (KV pool of rp.n_ctx cells for
  /// p.engine.n_parallel sequences). Throws what the engine or the chat template selection throws,
  /// and std::invalid_argument when a sequence cannot hold the smallest request (min_request_tokens).
  Server(examples::Loaded& model, const RunnerParams& rp, const ServerParams& p);

  /// Registers the routes, the thread pool, the body limit, the timeouts, the keep-alive limit,
  /// CORS (Access-Control-Allow-Origin: * on every response, OPTIONS preflights answered 204
  /// without the API key) and the access log on `http` (an HttpServer: pipelined requests are
  /// answered, http.h).
  void install(HttpServer& http);

  /// Shuts down cleanly (SIGINT, SIGTERM): ends every task (clients still waiting get 503 "the
  /// server is shutting down", a stream an error event and [DONE]), stops accepting, lets the
  /// handlers answer, then shuts the reading side of the connections still open on `port` so
  /// that none waits out the read timeout (a keep-alive client, a request that arrives slowly).
  /// Returns once http has stopped running (its listen call returns).
  void stop(HttpServer& http, int port);

  Engine& engine() { return *engine_; }
  const ServerParams& params() const { return params_; }

 private:
  struct Stream;
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void stream_response(httplib::Response& res, Job job, ResponseMeta meta, const std::shared_ptr<Task>& task);
  bool stream_step(Stream& st, httplib::DataSink& sink);
  std::string metrics_text() const;
  bool authorized(const httplib::Request& req) const;
  jinja::Text render(const chat::ChatInputs& in) const;

  examples::Loaded& m_;
  ServerParams params_;
  chat::ChatTemplate template_;
  mutable std::mutex template_mu_;
  std::unique_ptr<Engine> engine_;
  ApiLimits limits_;
  std::mutex streams_mu_;  // streams_: streamed responses not over yet (stop() lets them end)
  std::condition_variable streams_cv_;
  int streams_ = 0;
};

}  // namespace minfer::server
