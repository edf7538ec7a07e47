#include "server.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <thread>
#include <utility>

#include "chat/tokenize_chat.h"
#include "conn.h"
#include "pool.h"

namespace minfer::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxDepth = 64;
// Members of one JSON object (tool schemas and template kwargs have tens): parsing an object
// costs its size squared (ordered_json), ~1 ms at this bound.
constexpr size_t kMaxObjectKeys = 1024;
constexpr size_t kMaxHttpThreads = 1024;  // the pool grows to this (or --threads-http) on demand
// Requests one connection may carry before the server closes it (the last response says
// "Connection: close"); current httplib's default, where 0.11's was 5.
constexpr size_t kKeepAliveMaxRequests = 100;

// What the access-log line of the request this thread is serving says beyond httplib's Request
// and Response. A handler and its content provider run on the connection's thread, and the
// logger after them.
struct LogInfo {
  Clock::time_point t0 = Clock::now();
  int64_t prompt = -1, generated = -1;
  const char* note = "";  // e.g. a stream whose client went away (its status line said 200)
};
thread_local LogInfo g_log;
// Set when the request this thread serves reached routing (the pre-routing handler), cleared as
// its response goes out: a response without it is httplib's refusal of a request it could not
// parse.
thread_local bool g_routed = false;

// CORS, as llama-server: any origin may call the API from a browser. The preflight (OPTIONS)
// names the headers a call may carry; it never carries the API key itself.
constexpr const char* kCorsAllowHeaders = "Authorization, Content-Type, X-Api-Key";

// A comma-separated list of HTTP header names (RFC 9110 tokens, optional spaces), as a
// preflight's Access-Control-Request-Headers carries; at most 4 KiB.
bool is_header_name_list(const std::string& v) {
  if (v.empty() || v.size() > 4096) return false;
  bool name = false;
  for (const char c : v) {
    if (std::isalnum(static_cast<unsigned char>(c)) || (c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c))) name = true;
    else if (c == ',' && name) name = false;
    else if (c != ' ' && c != '\t') return false;
  }
  return name;
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> n{0};
  return fmt::format("{}-{:x}{:06x}", prefix, static_cast<uint64_t>(std::time(nullptr)), ++n);
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(dump(error_json(message, status)), "application/json");
}

// The methods a route answers, for Allow headers (405 and the CORS preflight): its own, HEAD with
// GET, and OPTIONS.
std::string allowed_methods(const std::string& route_method) {
  return route_method == "GET" ? "GET, HEAD, OPTIONS" : route_method + ", OPTIONS";
}

constexpr const char* kBadKey = "invalid or missing API key (send Authorization: Bearer KEY)";

std::string too_large(size_t max_body) { return fmt::format("the request body is larger than --max-body ({} bytes)", max_body); }

// An error for a request whose body (or the rest of it) stays unread: the connection ends after
// it (the post-routing handler closes on "Connection: close"), since those bytes are no request.
void refuse_unread(const httplib::Request& req, httplib::Response& res, int status, const std::string& message) {
  send_error(res, status, fmt::format("{} {}: {}", req.method, req.path, message));
  res.set_header("Connection", "close");
}

// A request body as JSON, its nesting and its objects' sizes bounded (a deep body would exhaust
// the parser's stack, a wide object cost quadratic time); nullopt after answering 400.
std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res) {
  const JsonShape shape = json_shape(req.body);
  if (shape.depth > kMaxDepth) {
    send_error(res, 400, fmt::format("the JSON nests deeper than {} levels", kMaxDepth));
    return std::nullopt;
  }
  if (shape.widest_object > kMaxObjectKeys) {
    send_error(res, 400, fmt::format("a JSON object has more than {} members", kMaxObjectKeys));
    return std::nullopt;
  }
  try {
    return json::parse(req.body);
  } catch (const json::exception& e) {
    send_error(res, 400, fmt::format("invalid JSON: {}", e.what()));
    return std::nullopt;
  }
}

int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  if (!(f >> pages >> resident)) return 0;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Token text for /tokenize's with_pieces: a string when it is valid UTF-8, else its bytes (as
// llama-server).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// The smallest request a sequence must hold: a one-word user message in the chat template and
// one generated token (2, one prompt token and one generated, when the template cannot render it).
int32_t min_request_tokens(const chat::ChatTemplate& tpl, const tokenizer::Tokenizer& tok) {
  try {
    chat::ChatInputs in;
    in.messages = chat::messages_value({{"user", "hi"}});
    return static_cast<int32_t>(chat::tokenize_chat(tok, tpl.render(in)).size()) + 1;
  } catch (const std::exception&) {
    return 2;
  }
}

}  // namespace

// One streamed response: what was sent so far.
struct Server::Stream {
  Job job;
  ResponseMeta meta;
  std::shared_ptr<Task> task;
  bool started = false;
  std::vector<bool> reported;    // finish chunk sent
  std::vector<TextOffset> offsets;  // completions' text_offset per output
  // Per output: logprobs whose text is not sent yet, the bytes of text sent, and where the first
  // held logprob's text begins (logprobs_in_text).
  std::vector<std::vector<TokenLogprob>> lp_held;
  std::vector<size_t> text_bytes, lp_bytes;
  std::vector<GenerateResult> results;
  int32_t n_reported = 0;
};

Server::Server(examples::Loaded& model, const RunnerParams& rp, const ServerParams& p)
    : m_(model), params_(p), template_(chat::select_chat_template(*model.tok, p.chat_template)) {
  if (params_.model_name.empty()) {
    params_.model_name = m_.model->hparams().name;
    if (params_.model_name.empty()) params_.model_name = std::filesystem::path(m_.file->name()).stem().string();
  }
  engine_ = std::make_unique<Engine>([&](const RunnerParams& r) { return m_.runner(r); }, *m_.tok, rp, params_.engine);
  // A server whose sequences cannot hold a short chat would answer every request with 400
  // (-np 4 -c 1: one token per sequence): refuse to start instead.
  if (const int32_t need = min_request_tokens(template_, *m_.tok); engine_->n_ctx_seq() < need)
    throw std::invalid_argument(fmt::format("a sequence holds {} token{} (-c is the KV pool of all -np {} slots, at most the "
                                            "model's context per sequence), but the smallest request needs {} (a one-word "
                                            "chat message and one generated token): raise -c to at least {}",
                                            engine_->n_ctx_seq(), engine_->n_ctx_seq() == 1 ? "" : "s", engine_->n_parallel(),
                                            need, need));
  limits_.n_ctx_seq = engine_->n_ctx_seq();
  limits_.n_vocab = m_.tok->n_vocab();
  limits_.n_parallel = engine_->n_parallel();
  limits_.max_outputs = engine_->n_parallel() + engine_->queue();
  for (int32_t id = 0; id < m_.tok->n_vocab(); ++id)
    limits_.max_token_bytes = std::max(limits_.max_token_bytes, m_.tok->token_to_piece(id).size());
  limits_.sampling = params_.sampling;
  limits_.n_predict = params_.n_predict;
  limits_.prefill_assistant = params_.prefill_assistant;
}

jinja::Text Server::render(const chat::ChatInputs& in) const {
  std::lock_guard<std::mutex> lk(template_mu_);
  return template_.render(in);
}

bool Server::authorized(const httplib::Request& req) const {
  if (params_.api_key.empty()) return true;
  std::string given;
  const std::string auth = req.get_header_value("Authorization");
  // The scheme is case-insensitive (RFC 9110 11.1).
  if (auth.size() > 7 && auth[6] == ' ' && std::equal(auth.begin(), auth.begin() + 6, "bearer", [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == b;
      }))
    given = auth.substr(7);
  else given = req.get_header_value("X-Api-Key");
  // Constant-time comparison of equal lengths.
  const std::string& key = params_.api_key;
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

void Server::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  const auto parsed = parse_body(req, res);
  if (!parsed) return;
  const json& body = *parsed;
  Job job;
  try {
    job = parse_job(body, chat, *m_.tok, limits_, [this](const chat::ChatInputs& in) { return render(in); });
  } catch (const BadRequest& e) {
    return send_error(res, 400, e.what());
  }
  auto task = std::make_shared<Task>();
  int64_t n_prompt = 0;
  for (const auto& p : job.prompts) {
    Request r;
    r.prompt = p;
    r.params = job.gen;
    r.sampling = job.sampling;
    r.n_choices = job.n;
    r.n_logprobs = job.n_logprobs;
    r.cache_prompt = job.cache_prompt;
    task->requests.push_back(std::move(r));
    n_prompt += static_cast<int64_t>(p.size());
  }
  g_log.prompt = n_prompt;
  task->fd = connection_fd(req);
  if (!engine_->submit(task)) {
    res.set_header("Retry-After", "1");
    if (engine_->stopping()) return send_error(res, 503, "the server is shutting down");
    return send_error(res, 503,
                      fmt::format("the server is busy: {} sequences run and {} may wait (-np, --queue); retry later",
                                  engine_->n_parallel(), engine_->queue()));
  }
  ResponseMeta meta{new_id(chat ? "chatcmpl" : "cmpl"), params_.model_name, now_s()};
  if (job.stream) {
    // The status line goes out with the first chunk, so a stream waits for its first token (or
    // its end): a request that fails before producing anything — it waited past --timeout in
    // the queue, the server is shutting down, the pool cannot hold it — gets its real status,
    // as a plain request does, not a 200 with an empty choice.
    std::unique_lock<std::mutex> lk(task->mu);
    task->cv.wait(lk, [&] {
      if (task->done) return true;
      return std::any_of(task->choices.begin(), task->choices.end(),
                         [](const Task::Choice& c) { return !c.text.empty() || !c.logprobs.empty() || !c.result.ids.empty(); });
    });
    bool failed = false;
    if (task->done) {  // every choice's result is in
      int64_t generated = 0;
      for (const auto& c : task->choices) generated += static_cast<int64_t>(c.result.ids.size());
      failed = task->cancelled || task->error_status != 0 || (task->timed_out && generated == 0);
    }
    if (!failed) {
      lk.unlock();
      return stream_response(res, std::move(job), std::move(meta), task);
    }
  } else {
    task->wait();
  }
  std::lock_guard<std::mutex> lk(task->mu);
  int64_t generated = 0;
  for (const auto& c : task->choices) generated += static_cast<int64_t>(c.result.ids.size());
  g_log.generated = generated;
  if (task->cancelled) {  // the client went away: nobody reads this (499 as nginx logs it)
    res.status = 499;
    g_log.note = " (client went away)";
    return;
  }
  if (task->error_status == 503) res.set_header("Retry-After", "1");
  if (task->error_status != 0) return send_error(res, task->error_status, task->error);
  if (task->timed_out && generated == 0) {
    res.set_header("Retry-After", "1");
    return send_error(res, 503, fmt::format("the request waited past --timeout ({} s) before it could start",
                                            params_.engine.timeout_s));
  }
  std::vector<GenerateResult> outputs;
  for (auto& c : task->choices) outputs.push_back(std::move(c.result));
  res.set_content(dump(completion_json(job, outputs, meta, *m_.tok)), "application/json");
}

void Server::stream_response(httplib::Response& res, Job job, ResponseMeta meta, const std::shared_ptr<Task>& task) {
  auto st = std::make_shared<Stream>();
  st->job = std::move(job);
  st->meta = std::move(meta);
  st->task = task;
  const auto n = static_cast<size_t>(task->n_outputs());
  st->reported.assign(n, false);
  st->offsets.assign(n, TextOffset{});
  st->lp_held.assign(n, {});
  st->text_bytes.assign(n, 0);
  st->lp_bytes.assign(n, 0);
  st->results.resize(n);
  {
    std::lock_guard<std::mutex> lk(streams_mu_);
    ++streams_;
  }
  res.set_chunked_content_provider(
      "text/event-stream", [this, st](size_t, httplib::DataSink& sink) { return stream_step(*st, sink); },
      [this, st](bool) {
        // The response is over (sent, or the connection failed): the task must have left the
        // engine before httplib closes the socket the engine polls.
        if (st->n_reported < static_cast<int32_t>(st->reported.size())) engine_->cancel(*st->task);
        st->task->wait();
        std::lock_guard<std::mutex> lk(streams_mu_);
        --streams_;
        streams_cv_.notify_all();
      });
}

// Sends what the engine produced since the last call; called by httplib until sink.done().
bool Server::stream_step(Stream& st, httplib::DataSink& sink) {
  Task& t = *st.task;
  const Job& job = st.job;
  auto write = [&](const json& j) {
    const std::string s = "data: " + dump(j) + "\n\n";
    return sink.write(s.data(), s.size());
  };
  // The tokens the task's choices generated, for the access log, once the engine has let it go
  // (its results are then in).
  auto generated_when_done = [&] {
    t.wait();
    int64_t generated = 0;
    std::lock_guard<std::mutex> lk(t.mu);
    for (const auto& c : t.choices) generated += static_cast<int64_t>(c.result.ids.size());
    return generated;
  };
  auto give_up = [&] {  // the client is gone: end the task, wait until the engine let it go
    engine_->cancel(t);
    g_log.generated = generated_when_done();
    g_log.note = " (client went away)";
    return false;
  };
  const auto n = static_cast<int32_t>(st.reported.size());
  if (!st.started) {
    st.started = true;
    if (job.chat)
      for (int32_t i = 0; i < n; ++i)
        if (!write(chunk_json(job, st.meta, i, "", {}, nullptr, true, *m_.tok, nullptr))) return give_up();
  }
  struct Out {
    int32_t i;
    std::string text;
    std::vector<TokenLogprob> lps;
    bool finish = false;
  };
  std::vector<Out> outs;
  std::string error;
  int error_status = 0;
  bool cancelled = false;
  bool task_done = false;
  {
    std::unique_lock<std::mutex> lk(t.mu);
    auto news = [&] {
      if (t.done) return true;
      for (int32_t i = 0; i < n; ++i) {
        const Task::Choice& c = t.choices[static_cast<size_t>(i)];
        if (!c.text.empty() || (c.done && !st.reported[static_cast<size_t>(i)])) return true;
      }
      return false;
    };
    t.cv.wait(lk, news);
    for (int32_t i = 0; i < n; ++i) {
      Task::Choice& c = t.choices[static_cast<size_t>(i)];
      const bool finish = c.done && !st.reported[static_cast<size_t>(i)];
      if (c.text.empty() && !finish) continue;
      Out o{i, std::move(c.text), std::move(c.logprobs), finish};
      c.text.clear();
      c.logprobs.clear();
      if (finish) {
        st.results[static_cast<size_t>(i)] = c.result;
        const GenerateResult& r = c.result;
        if (r.stop_reason == "eog" && !o.lps.empty() && m_.tok->is_eog(o.lps.back().id)) o.lps.pop_back();
      }
      outs.push_back(std::move(o));
    }
    error = t.error;
    error_status = t.error_status;
    cancelled = t.cancelled;
    task_done = t.done;
  }
  if (cancelled) return give_up();
  // A logprob goes out with the chunk that sends the start of its token's text; at the end, the
  // tokens of a stop string cut from the text are dropped.
  for (Out& o : outs) {
    const auto i = static_cast<size_t>(o.i);
    auto& held = st.lp_held[i];
    held.insert(held.end(), o.lps.begin(), o.lps.end());
    st.text_bytes[i] += o.text.size();
    size_t k = logprobs_in_text(held, st.text_bytes[i], &st.lp_bytes[i], *m_.tok);
    if (o.finish && st.results[i].stop_reason != "stop") k = held.size();
    o.lps.assign(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(k));
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(k));
    if (o.finish) held.clear();
  }
  if (!error.empty()) {  // the text that came before the error, then the error, then [DONE]
    for (const Out& o : outs)
      if ((!o.text.empty() || !o.lps.empty()) &&
          !write(chunk_json(job, st.meta, o.i, o.text, o.lps, nullptr, false, *m_.tok, &st.offsets[static_cast<size_t>(o.i)])))
        return give_up();
    write(error_json(error, error_status));
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    st.n_reported = n;
    // What was generated before the error (a shutdown, a failed step): the engine ends the task
    // within a step, and its results keep the tokens each choice produced.
    g_log.generated = generated_when_done();
    return true;
  }
  for (Out& o : outs) {
    const auto i = static_cast<size_t>(o.i);
    if ((!o.text.empty() || !o.lps.empty()) &&
        !write(chunk_json(job, st.meta, o.i, o.text, o.lps, nullptr, false, *m_.tok, &st.offsets[i])))
      return give_up();
    if (!o.finish) continue;
    st.reported[i] = true;
    ++st.n_reported;
    json fin = chunk_json(job, st.meta, o.i, "", {}, finish_reason(st.results[i]), false, *m_.tok, nullptr);
    const bool last = st.n_reported == n;
    if (last && !job.include_usage) {  // llama-server's way: usage and timings on the last chunk
      fin["usage"] = usage_json(job, st.results);
      fin["timings"] = timings_json(st.results);
    }
    if (!write(fin)) return give_up();
  }
  // The stream ends once the task is done, not when its last choice is: the engine marks the task
  // done after its metrics snapshot, so a client that has [DONE] sees /metrics that count it.
  if (st.n_reported < n || !task_done) return true;
  if (job.include_usage) {  // OpenAI's way: one more chunk with no choices
    json u = {{"id", st.meta.id},
              {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", st.meta.created},
              {"model", st.meta.model},
              {"choices", json::array()},
              {"usage", usage_json(job, st.results)}};
    if (!write(u)) return give_up();
  }
  int64_t generated = 0;
  for (const auto& r : st.results) generated += static_cast<int64_t>(r.ids.size());
  g_log.generated = generated;
  const std::string done = "data: [DONE]\n\n";
  if (!sink.write(done.data(), done.size())) return give_up();
  sink.done();
  return true;
}

void Server::stop(HttpServer& http, int port) {
  engine_->cancel_all();
  // A signal that came during startup (it waited, blocked, while the model loaded) can arrive
  // before the listen call has begun, and httplib's stop() does nothing to a server not running
  // yet: the listen would then go on for ever. Wait (a while) for it to begin.
  for (int i = 0; i < 500 && !http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  engine_->wait_idle(std::chrono::seconds(10));
  // Streams end with their error event and [DONE] before httplib stops: once stopped, it calls a
  // content provider no more (the stream would just be cut).
  {
    std::unique_lock<std::mutex> lk(streams_mu_);
    streams_cv_.wait_for(lk, std::chrono::seconds(10), [&] { return streams_ == 0; });
  }
  http.stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // plain handlers write their answers
  while (http.is_running()) {
    shut_reads(port);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string Server::metrics_text() const {
  const EngineMetrics m = engine_->metrics();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP minfer:{} {}\n# TYPE minfer:{} {}\nminfer:{} {}\n", name, help, name, type, name, value);
  };
  metric("requests_total", "counter", "Requests accepted for generation.", m.requests_total);
  metric("requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.", m.requests_rejected);
  metric("requests_finished_total", "counter", "Requests that ended, however they ended.", m.requests_finished);
  metric("requests_cancelled_total", "counter", "Requests ended because the client went away.", m.requests_cancelled);
  metric("requests_timed_out_total", "counter", "Requests ended by --timeout.", m.requests_timed_out);
  metric("requests_failed_total", "counter", "Requests that ended in a server error.", m.requests_failed);
  metric("requests_active", "gauge", "Prompts with a running sequence.", m.requests_running);
  metric("requests_queued", "gauge", "Prompts waiting for a slot or KV blocks.", m.requests_queued);
  metric("sequences_running", "gauge", "Sequences decoding or prefilling (n choices run n).", m.sequences_running);
  metric("prompt_tokens_total", "counter", "Prompt tokens evaluated.", m.prompt_tokens);
  metric("prefix_cache_hit_tokens_total", "counter", "Prompt tokens taken from the prefix cache instead of evaluated.", m.cached_tokens);
  metric("generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens);
  metric("prompt_tokens_per_second", "gauge", "Prompt tokens evaluated per second over the last 10 s.", m.prompt_tok_s);
  metric("generated_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.", m.generated_tok_s);
  metric("busy_seconds_total", "counter", "Time spent in forward passes.", m.busy_s);
  metric("steps_total", "counter", "Forward passes.", m.steps);
  metric("preemptions_total", "counter", "Sequences preempted for KV blocks (recomputed later).", m.preemptions);
  metric("kv_blocks_total", "gauge", "KV cache blocks in the pool.", m.kv_blocks_total);
  metric("kv_blocks_used", "gauge", "KV cache blocks held by sequences.", m.kv_blocks_used);
  metric("kv_blocks_free", "gauge", "KV cache blocks free (cached ones included).", m.kv_blocks_total - m.kv_blocks_used);
  metric("kv_blocks_cached", "gauge", "Free KV cache blocks that keep a prompt prefix for reuse.", m.kv_blocks_cached);
  metric("kv_block_size", "gauge", "Tokens per KV cache block.", m.kv_block_size);
  metric("kv_cache_evictions_total", "counter", "Cached blocks evicted for new ones (least recently used first).", m.kv_evictions);
  metric("n_parallel", "gauge", "Sequences decoded together (-np).", m.n_parallel);
  metric("queue_size", "gauge", "Sequences that may wait beyond the running ones (--queue).", m.queue);
  out += "# HELP minfer:engine_seconds_total Engine thread time by phase: plan (admit, choose the batch), graph "
         "(find or build the step graph), compute (upload inputs, run, synchronize), logits (copy them back), sample, "
         "commit (detokenize, stop rules, stream), outside (the loop around steps).\n"
         "# TYPE minfer:engine_seconds_total counter\n";
  for (const auto& [phase, v] : {std::pair{"plan", m.plan_s}, {"graph", m.graph_s}, {"compute", m.compute_s},
                                 {"logits", m.logits_s}, {"sample", m.sample_s}, {"commit", m.commit_s},
                                 {"outside", m.outside_s}})
    out += fmt::format("minfer:engine_seconds_total{{phase=\"{}\"}} {}\n", phase, v);
  out += fmt::format("# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                     "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}\n",
                     rss_bytes());
  return out;
}

void Server::install(HttpServer& http) {
  const int threads =
      params_.threads_http > 0 ? params_.threads_http : engine_->n_parallel() + engine_->queue() + 8;
  // Threads start on demand past `threads` (pool.h): connections that are slow to send their
  // request cannot take every thread.
  const auto most = std::max<size_t>(static_cast<size_t>(threads), kMaxHttpThreads);
  http.new_task_queue = [threads, most] { return new GrowingPool(static_cast<size_t>(threads), most); };
  http.set_payload_max_length(params_.max_body);
  http.set_keep_alive_max_count(kKeepAliveMaxRequests);
  // --timeout 0 is "none": without a value httplib's 5 s would cut a request whose body is a
  // little slow to come and a stream whose client stops reading for 5 s. (A day: httplib's poll
  // takes the timeout in int milliseconds.)
  const auto sec = params_.engine.timeout_s > 0 ? static_cast<time_t>(std::max(1.0, params_.engine.timeout_s)) : time_t{86400};
  http.set_read_timeout(sec);
  http.set_write_timeout(sec);
  // Runs before httplib reads anything of a body, and decides which bodies are read at all:
  // httplib 0.11 reads a chunked body without the --max-body limit (a 300 MB upload was held in
  // memory, also before a 401), leaves the rest of a malformed one on the connection to be parsed
  // as the next request, and never reads a GET's body, which then becomes a request too. So:
  // a request that may not have a body (GET, HEAD, OPTIONS) and carries one, or a method or path
  // that takes none, is answered here and its connection closed; only a POST to a POST route
  // goes on, to its content reader (route(), below), which checks the key before reading and
  // stops at --max-body. A POST with neither Content-Length nor chunked encoding has no body
  // (RFC 9112), but httplib reads one until the client closes (`curl -X POST` with no data waited
  // out the read timeout): 411. A Content-Length that is not a number ("-5", or past 2^64) was
  // read as ULLONG_MAX: 400. Both Content-Length and Transfer-Encoding, or two Content-Lengths
  // that disagree: 400 (RFC 9112 6.3).
  auto routes = std::make_shared<std::vector<std::pair<std::regex, std::string>>>();  // path, its method
  http.set_pre_routing_handler([this, routes](const httplib::Request& req, httplib::Response& res) {
    g_log = LogInfo{};
    g_routed = true;
    const auto refuse = [&](int status, const std::string& message) {
      refuse_unread(req, res, status, message);
      return httplib::Server::HandlerResponse::Handled;
    };
    std::string te = req.get_header_value("Transfer-Encoding");
    std::transform(te.begin(), te.end(), te.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const bool encoded = req.has_header("Transfer-Encoding");
    const bool has_cl = req.has_header("Content-Length");
    const std::string cl = req.get_header_value("Content-Length");
    // Content-Length headers that disagree (RFC 9112 6.3: unrecoverable): httplib reads the first
    // and the rest of the body became a second, smuggled request.
    for (size_t i = 1; i < req.get_header_value_count("Content-Length"); ++i)
      if (req.get_header_value("Content-Length", i) != cl) return refuse(400, "Content-Length headers that disagree");
    const std::string* method = nullptr;  // the route's
    for (const auto& [re, m] : *routes)
      if (std::regex_match(req.path, re)) {
        method = &m;
        break;
      }
    // Every 405 is answered here, with the methods the OPTIONS preflight lists.
    const auto not_allowed = [&] {
      res.set_header("Allow", allowed_methods(*method));
      send_error(res, 405, fmt::format("{} {}: method not allowed (use {})", req.method, req.path, *method));
      return httplib::Server::HandlerResponse::Handled;
    };
    if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS") {
      if (encoded || (has_cl && cl != "0")) return refuse(400, "this request may not carry a body");
      if (req.method != "OPTIONS" && method != nullptr && *method != "GET") return not_allowed();
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (method == nullptr) return refuse(404, "no such endpoint");
    if (req.method != "POST" || *method != "POST") {
      not_allowed();
      res.set_header("Connection", "close");  // its body is unread
      return httplib::Server::HandlerResponse::Handled;
    }
    if (encoded) {
      if (has_cl) return refuse(400, "both Content-Length and Transfer-Encoding");
      if (te != "chunked") return refuse(501, fmt::format("transfer encoding '{}' is not supported (only chunked)", te.substr(0, 40)));
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (!has_cl) {
      send_error(res, 411, fmt::format("{} {}: the request needs a Content-Length (or chunked transfer encoding)", req.method, req.path));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (cl.empty() || cl.size() > 18 || !std::all_of(cl.begin(), cl.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return refuse(400, fmt::format("invalid Content-Length '{}'", cl.substr(0, 40)));
    if (std::stoull(cl) > params_.max_body)
      return refuse(413, too_large(params_.max_body));
    // Every body is JSON whatever its Content-Type, as in llama-server. `curl -d` labels its data
    // application/x-www-form-urlencoded, and httplib parses such bodies as form fields and refuses
    // any past 8 KiB with 413 (a compile-time limit of the packaged library, not --max-body): a
    // long prompt sent like the docs' first example failed. httplib's Request here is a
    // non-const object handed to us as const; dropping the label makes httplib keep the bytes.
    if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
      auto& headers = const_cast<httplib::Headers&>(req.headers);
      headers.erase("Content-Type");
      headers.emplace("Content-Type", "application/json");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Runs for every response as its headers go out, httplib's own refusals included. A response
  // that says "Connection: close" (a Content-Length that leaves the body's end unknown) and one
  // to a request httplib could not parse end the connection: what follows on it cannot be framed
  // as a request. httplib 0.11 would keep it open and add a contradicting Keep-Alive header.
  http.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    const bool refused = !std::exchange(g_routed, false);
    if (refused || res.get_header_value("Connection") == "close") {
      res.headers.erase("Keep-Alive");
      res.headers.erase("Connection");
      res.set_header("Connection", "close");
      HttpServer::close_after_response();
    }
    if (res.status == 204) res.headers.erase("Content-Length");  // RFC 9110: a 204 has none
  });
  http.set_default_headers({{"Access-Control-Allow-Origin", "*"}});
  if (params_.access_log) {
    http.set_logger([sink = params_.log](const httplib::Request& req, const httplib::Response& res) {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - g_log.t0).count();
      std::string tokens;
      if (g_log.prompt >= 0) tokens = fmt::format(" prompt={} gen={}", g_log.prompt, std::max<int64_t>(g_log.generated, 0));
      const std::string line =
          fmt::format("{} {} {} {}{} {:.1f} ms{}", req.remote_addr, req.method, req.path, res.status, tokens, ms, g_log.note);
      if (sink) sink(line);
      else std::fprintf(stderr, "%s\n", line.c_str());
      g_log = LogInfo{};  // a request httplib refuses before routing must not inherit these
    });
  }
  // Unknown routes and wrong methods get a JSON error too (OpenAI clients parse every body).
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404   ? "no such endpoint"
                      : res.status == 413 ? too_large(params_.max_body)
                      : res.status == 400 ? "the request could not be read (malformed HTTP, or it did not arrive within the read timeout)"
                      : res.status == 414 ? fmt::format("the request URI is over {} bytes", CPPHTTPLIB_REQUEST_URI_MAX_LENGTH)
                                          : std::string("request failed");
    // A request refused while its line was read has no method or path to name.
    const std::string where = req.method.empty() ? std::string("request") : req.method + " " + req.path;
    res.set_content(dump(error_json(fmt::format("{}: {}", where, msg), res.status)), "application/json");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });

  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  // Each path answers its method (the pre-routing handler above answers the others with 405).
  // A POST route reads its body itself, through httplib's content reader: the API key is
  // checked first, the body is refused past --max-body (chunked bodies too) and a body that
  // cannot be read (a malformed chunk) ends the connection, whose remaining bytes are not a
  // request.
  auto route = [this, &http, routes](const std::string& path, const char* method, Handler h, bool open = false) {
    routes->emplace_back(std::regex(path), method);
    // The handler behind the key check (which each method makes where it can: a POST before
    // reading its body).
    Handler serve = [h](const httplib::Request& req, httplib::Response& res) {
      try {
        h(req, res);
      } catch (const BadRequest& e) {
        send_error(res, 400, e.what());
      } catch (const std::exception& e) {
        send_error(res, 500, e.what());
      }
    };
    const std::string allowed = method;
    // A browser's CORS preflight before a call with an API key or a JSON body: no key needed
    // (a preflight never carries one), 204 with what the path accepts.
    // The headers allowed are those the browser asks for (clients add their own: the OpenAI
    // SDKs send X-Stainless-*; the server reads only the ones it knows), echoed rather than "*",
    // which does not cover Authorization (Fetch standard).
    Handler preflight = [allowed](const httplib::Request& req, httplib::Response& res) {
      const std::string methods = allowed_methods(allowed);
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.status = 204;
      res.set_header("Allow", methods);
      res.set_header("Access-Control-Allow-Methods", methods);
      res.set_header("Access-Control-Allow-Headers", is_header_name_list(asked) ? asked : kCorsAllowHeaders);
      res.set_header("Vary", "Access-Control-Request-Headers");
      res.set_header("Access-Control-Max-Age", "86400");
    };
    http.Options(path, preflight);
    if (allowed == "GET") {
      http.Get(path, [this, serve, open](const httplib::Request& req, httplib::Response& res) {
        if (!open && !authorized(req)) {
          res.set_header("WWW-Authenticate", "Bearer");
          return send_error(res, 401, kBadKey);
        }
        serve(req, res);
      });
      return;
    }
    http.Post(path, [this, serve, open](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& read) {
      if (!open && !authorized(req)) {
        res.set_header("WWW-Authenticate", "Bearer");
        return refuse_unread(req, res, 401, kBadKey);
      }
      std::string body;
      bool too_big = false;
      const bool ok = read([&](const char* data, size_t n) {
        if (n > params_.max_body - body.size()) return !(too_big = true);
        body.append(data, n);
        return true;
      });
      if (too_big)
        return refuse_unread(req, res, 413, too_large(params_.max_body));
      if (!ok)
        return refuse_unread(req, res, 400, "the request body could not be read (malformed chunked encoding, or it did not arrive within the read timeout)");
      // httplib hands a non-const Request as const; the route handlers read the body from it.
      const_cast<std::string&>(req.body) = std::move(body);
      serve(req, res);
    });
  };

  // While shutting down, 503: a load balancer stops sending requests that would be refused.
  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (!engine_->stopping()) return res.set_content(R"({"status":"ok"})", "application/json");
    json j = error_json("the server is shutting down", 503);
    j["status"] = "shutting down";
    res.status = 503;
    res.set_content(dump(j), "application/json");
  };
  route("/health", "GET", health, true);
  route("/v1/health", "GET", health, true);
  auto model_json = [this] {
    const auto& hp = m_.model->hparams();
    json meta = {{"n_vocab", m_.tok->n_vocab()},     {"n_ctx_train", hp.n_ctx_train},  {"n_ctx", engine_->n_ctx_seq()},
                 {"n_ctx_pool", engine_->n_ctx_pool()}, {"n_parallel", engine_->n_parallel()}, {"queue", engine_->queue()}};
    return json{{"id", params_.model_name}, {"object", "model"}, {"created", now_s()}, {"owned_by", "minfer"}, {"meta", meta}};
  };
  auto models = [model_json](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({model_json()})}}), "application/json");
  };
  route("/v1/models", "GET", models);
  route("/models", "GET", models);
  // OpenAI's retrieve-model: the model object, or 404 for an id the server does not serve (ids
  // may hold slashes, "org/name": the rest of the path is the id).
  auto model = [this, model_json](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != params_.model_name)
      return send_error(res, 404, fmt::format("the model '{}' does not exist (this server serves '{}')", id, params_.model_name));
    res.set_content(dump(model_json()), "application/json");
  };
  route(R"(/v1/models/(.+))", "GET", model);
  route(R"(/models/(.+))", "GET", model);
  route("/metrics", "GET", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
  for (const char* p : {"/v1/completions", "/completions"})
    route(p, "POST", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); });
  for (const char* p : {"/v1/chat/completions", "/chat/completions"})
    route(p, "POST", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });

  route("/tokenize", "POST", [this](const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_body(req, res);
    if (!parsed) return;
    json& body = *parsed;
    if (!body.is_object() || !body.contains("content") || !body["content"].is_string())
      return send_error(res, 400, "'content' must be a string");
    auto flag = [&](const char* key, bool def) {
      if (!body.contains(key) || body[key].is_null()) return def;
      if (!body[key].is_boolean()) throw BadRequest(fmt::format("'{}' must be a boolean", key));
      return body[key].get<bool>();
    };
    const bool add_special = flag("add_special", false), parse_special = flag("parse_special", true);
    const bool with_pieces = flag("with_pieces", false);
    std::vector<int32_t> ids;
    try {
      ids = m_.tok->encode(body["content"].get<std::string>(), parse_special);
    } catch (const std::invalid_argument& e) {
      return send_error(res, 400, e.what());
    }
    if (add_special) ids = m_.tok->with_bos(std::move(ids));
    g_log.prompt = static_cast<int64_t>(ids.size());
    json tokens = json::array();
    for (int32_t id : ids) {
      if (!with_pieces) {
        tokens.push_back(id);
        continue;
      }
      const std::string& piece = m_.tok->token_to_piece(id);
      json p = valid_utf8(piece) ? json(piece) : json::array();
      if (!p.is_string())
        for (unsigned char c : piece) p.push_back(static_cast<int>(c));
      tokens.push_back({{"id", id}, {"piece", p}});
    }
    res.set_content(dump(json{{"tokens", tokens}}), "application/json");
  });
  route("/detokenize", "POST", [this](const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_body(req, res);
    if (!parsed) return;
    json& body = *parsed;
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
      return send_error(res, 400, "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const json& t : body["tokens"]) {
      if (!t.is_number_integer() && !t.is_number_unsigned()) return send_error(res, 400, "'tokens' must hold only integers");
      const int64_t id = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX)) : t.get<int64_t>();
      if (id < 0 || id >= m_.tok->n_vocab())
        return send_error(res, 400, fmt::format("token id {} is outside the vocabulary [0, {})", id, m_.tok->n_vocab()));
      ids.push_back(static_cast<int32_t>(id));
    }
    res.set_content(dump(json{{"content", m_.tok->decode(ids)}}), "application/json");
  });
}

}  // namespace minfer::server
