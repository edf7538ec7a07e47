#include "load.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

namespace minfer::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

httplib::Client make_client(const LoadParams& p, double read_timeout_s) {
  httplib::Client c(p.host, p.port);
  c.set_keep_alive(true);
  c.set_connection_timeout(10);
  const auto us = static_cast<int64_t>(read_timeout_s * 1e6);
  c.set_read_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  c.set_write_timeout(30);
  if (!p.api_key.empty()) c.set_bearer_token_auth(p.api_key);
  return c;
}

// The Prometheus text's value of `name` (first sample), or -1.
double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

struct ServerInfo {
  int32_t n_vocab = 0, n_ctx = 0;
};

ServerInfo server_info(const LoadParams& p) {
  auto c = make_client(p, 30);
  auto r = c.Get("/v1/models");
  if (!r) throw std::runtime_error(fmt::format("cannot reach {}:{}: {}", p.host, p.port, httplib::to_string(r.error())));
  if (r->status != 200) throw std::runtime_error(fmt::format("GET /v1/models: HTTP {}: {}", r->status, r->body));
  const json j = json::parse(r->body);
  ServerInfo s;
  const json& meta = j.at("data").at(0).at("meta");
  s.n_vocab = meta.at("n_vocab").get<int32_t>();
  s.n_ctx = meta.at("n_ctx").get<int32_t>();
  return s;
}

std::string get_metrics(const LoadParams& p) {
  auto c = make_client(p, 30);
  auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

// Server-sent events, fed in pieces: calls on_event with each "data: " payload.
class SseParser {
 public:
  template <typename F>
  void feed(const char* data, size_t n, F&& on_event) {
    buf_.append(data, n);
    size_t at;
    while ((at = buf_.find("\n\n")) != std::string::npos) {
      std::string ev = buf_.substr(0, at);
      buf_.erase(0, at + 2);
      if (ev.rfind("data: ", 0) == 0) on_event(ev.substr(6));
    }
  }

 private:
  std::string buf_;
};

enum class Kind { normal, cut_off, malformed };

struct Outcome {
  int status = 0;
  bool transport_error = false;
  bool stream = false;
  bool done = false;  // [DONE] seen (streams) / full body parsed
  double latency_ms = 0, ttft_ms = -1;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::string error;
};

// A malformed request body, one of several kinds; each must get 400.
std::string malformed_body(std::mt19937_64& rng, const ServerInfo& info) {
  switch (rng() % 8) {
    case 0: return "{\"prompt\": [1, 2, 3";  // truncated JSON
    case 1: return R"({"prompt": [1, 2], "max_tokens": "many"})";
    case 2: return R"({"prompt": [1, 2], "n": 100000})";
    case 3: return json{{"prompt", std::vector<int>(static_cast<size_t>(info.n_ctx) + 8, 1)}}.dump();  // longer than the context
    case 4: return json{{"prompt", {1, info.n_vocab + 5}}}.dump();  // token id outside the vocabulary
    case 5: return R"({"prompt": {"text": "x"}})";
    case 6: return std::string(200, '[') + std::string(200, ']');  // too deep
    default: return R"({"prompt": [1], "temperature": "hot"})";
  }
}

Outcome one_request(const LoadParams& p, const ServerInfo& info, std::mt19937_64& rng, Kind kind,
                    const std::vector<int32_t>& prefix, httplib::Client& keep_alive) {
  auto uniform = [&](int lo, int hi) { return lo >= hi ? lo : lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  const int out = uniform(p.out_min, p.out_max);
  const int room = std::max(1, info.n_ctx - out - 1);
  const int n_prompt = std::max(1, std::min(uniform(p.prompt_min, p.prompt_max), room));
  const bool stream = std::uniform_real_distribution<double>(0, 1)(rng) < p.stream;
  json body;
  std::string path = p.chat ? "/v1/chat/completions" : "/v1/completions";
  std::string text_body;
  if (kind == Kind::malformed) {
    path = "/v1/completions";
    text_body = malformed_body(rng, info);
  } else {
    if (p.chat) {
      std::string content;
      static const char* const kWords[] = {"def", "class", "return", "import", "for", "in", "if", "else", "self", "x", "y", "=", "(", ")"};
      for (int i = 0; i < n_prompt; ++i) content += std::string(kWords[rng() % 14]) + " ";
      body["messages"] = json::array({{{"role", "user"}, {"content", content}}});
    } else {
      std::vector<int32_t> ids(prefix.begin(), prefix.begin() + std::min<ptrdiff_t>(static_cast<ptrdiff_t>(prefix.size()), n_prompt));
      while (static_cast<int>(ids.size()) < n_prompt) ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(info.n_vocab)));
      body["prompt"] = ids;
    }
    body["max_tokens"] = out;
    body["temperature"] = 0.8;
    body["seed"] = rng() >> 1;
    body["ignore_eos"] = p.ignore_eos;
    body["stream"] = stream;
    if (stream) body["stream_options"] = {{"include_usage", true}};
    text_body = body.dump();
  }
  // A cut-off client: a stream reads 1-3 events and hangs up; a plain request gives up after a
  // short read timeout.
  const int cut_after = kind == Kind::cut_off ? uniform(1, 3) : -1;
  const double read_timeout = 0.01 * uniform(1, 20);
  std::optional<httplib::Client> own;  // a cut-off request closes its connection
  if (kind == Kind::cut_off) own.emplace(make_client(p, stream ? p.timeout_s : read_timeout));
  httplib::Client& client = own ? *own : keep_alive;
  Outcome o;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = text_body;
  req.set_header("Content-Type", "application/json");
  if (!p.api_key.empty()) req.set_header("Authorization", "Bearer " + p.api_key);
  std::string raw;
  SseParser sse;
  int events = 0;
  const auto t0 = Clock::now();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (!stream || kind == Kind::malformed) {
      raw.append(data, n);
      return true;
    }
    bool keep = true;
    sse.feed(data, n, [&](const std::string& ev) {
      ++events;
      if (ev == "[DONE]") {
        o.done = true;
        return;
      }
      try {
        const json j = json::parse(ev);
        if (j.contains("error")) o.error = j["error"].value("message", "error");
        if (j.contains("usage") && j["usage"].is_object()) {
          o.prompt_tokens = j["usage"].value("prompt_tokens", 0);
          o.completion_tokens = j["usage"].value("completion_tokens", 0);
        }
        if (o.ttft_ms < 0 && j.contains("choices") && !j["choices"].empty()) {
          const json& c = j["choices"][0];
          const bool text = (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) ||
                            (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string() &&
                             !c["delta"]["content"].get<std::string>().empty());
          if (text || (c.contains("finish_reason") && !c["finish_reason"].is_null())) o.ttft_ms = ms_since(t0);
        }
      } catch (const std::exception& e) {
        o.error = fmt::format("bad event: {}", e.what());
      }
    });
    if (cut_after >= 0 && events >= cut_after) keep = false;
    return keep;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = client.send(req, res, err);
  o.latency_ms = ms_since(t0);
  o.status = res.status;
  o.stream = stream;
  if (!sent) {
    o.transport_error = true;
    o.error = httplib::to_string(err);
    return o;
  }
  if (!stream || kind == Kind::malformed) {
    if (res.status == 200) {
      try {
        const json j = json::parse(raw);
        o.prompt_tokens = j.at("usage").at("prompt_tokens").get<int64_t>();
        o.completion_tokens = j.at("usage").at("completion_tokens").get<int64_t>();
        o.done = true;
      } catch (const std::exception& e) {
        o.error = fmt::format("bad response: {}", e.what());
      }
    } else {
      o.error = raw.substr(0, 200);
    }
  }
  return o;
}

LoadRound run_round(const LoadParams& p, const ServerInfo& info, uint64_t seed) {
  LoadRound round;
  std::mutex mu;
  std::vector<int32_t> prefix;
  {
    std::mt19937_64 rng(seed ^ 0x5eedull);
    for (int i = 0; i < p.shared_prefix; ++i) prefix.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(info.n_vocab)));
  }
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < p.clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(seed + 7919ull * static_cast<uint64_t>(c + 1));
      std::uniform_real_distribution<double> u(0, 1);
      auto client = make_client(p, p.timeout_s);
      for (int i = 0; i < p.requests; ++i) {
        const double x = u(rng);
        const Kind kind = x < p.malformed ? Kind::malformed : x < p.malformed + p.disconnect ? Kind::cut_off : Kind::normal;
        const Outcome o = one_request(p, info, rng, kind, prefix, client);
        std::lock_guard<std::mutex> lk(mu);
        auto problem = [&](const std::string& what) {
          ++round.unexpected;
          if (round.problems.size() < 20) round.problems.push_back(what);
        };
        if (kind == Kind::malformed) {
          if (o.status == 400) ++round.bad_400;
          else problem(fmt::format("a malformed request got HTTP {}{}", o.status, o.transport_error ? " (transport error)" : ""));
          continue;
        }
        if (kind == Kind::cut_off) {
          // Whatever the client saw before it hung up is fine, except a server error.
          if (o.status >= 500 && o.status != 503) problem(fmt::format("a cut-off request got HTTP {}: {}", o.status, o.error));
          else if (o.status == 503) ++round.rejected_503;
          else ++round.cut_off;
          continue;
        }
        if (o.transport_error) {
          problem(fmt::format("transport error ({}) after {:.0f} ms, {} request", o.error, o.latency_ms, o.stream ? "a streamed" : "a plain"));
        } else if (o.status == 503) {
          ++round.rejected_503;
        } else if (o.status != 200 || !o.done || !o.error.empty()) {
          problem(fmt::format("HTTP {}{}: {}", o.status, o.done ? "" : " (incomplete)", o.error));
        } else {
          ++round.ok;
          round.latency_ms.push_back(o.latency_ms);
          if (o.ttft_ms >= 0) round.ttft_ms.push_back(o.ttft_ms);
          round.prompt_tokens += o.prompt_tokens;
          round.completion_tokens += o.completion_tokens;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  round.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // The server is idle once the cut-off requests have retired (within a step of the hang-up).
  std::string m;
  for (int tries = 0; tries < 200; ++tries) {
    m = get_metrics(p);
    if (metric(m, "minfer:requests_active") == 0 && metric(m, "minfer:requests_queued") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  round.kv_blocks_used = static_cast<int64_t>(metric(m, "minfer:kv_blocks_used"));
  round.rss_mb = metric(m, "process_resident_memory_bytes") / 1048576.0;
  if (round.kv_blocks_used != 0) round.problems.push_back(fmt::format("{} KV blocks still used after the round", round.kv_blocks_used));
  return round;
}

}  // namespace

double percentile(std::vector<double> xs, double q) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(xs.size())));
  return xs[std::clamp<size_t>(rank, 1, xs.size()) - 1];
}

LoadReport run_load(const LoadParams& p) {
  const ServerInfo info = server_info(p);
  const uint64_t seed = p.seed != 0 ? p.seed : std::random_device{}();
  LoadReport rep;
  for (int r = 0; r < p.rounds; ++r) {
    rep.rounds.push_back(run_round(p, info, seed + 1000003ull * static_cast<uint64_t>(r)));
    for (const auto& s : rep.rounds.back().problems) rep.problems.push_back(fmt::format("round {}: {}", r + 1, s));
  }
  if (rep.rounds.size() >= 2) {
    const double grow = rep.rounds.back().rss_mb - rep.rounds.front().rss_mb;
    if (grow > p.rss_slack_mb)
      rep.problems.push_back(fmt::format("server RSS grew {:.1f} MiB from round 1 to round {} (slack {} MiB)", grow,
                                         rep.rounds.size(), p.rss_slack_mb));
  }
  rep.pass = rep.problems.empty();
  return rep;
}

std::string format_report(const LoadParams& p, const LoadReport& r) {
  std::string s = fmt::format("{} clients x {} requests x {} rounds; prompts {}-{} tokens, max_tokens {}-{}, {:.0f} % streamed, "
                              "{:.0f} % cut off, {:.0f} % malformed{}\n",
                              p.clients, p.requests, p.rounds, p.prompt_min, p.prompt_max, p.out_min, p.out_max, p.stream * 100,
                              p.disconnect * 100, p.malformed * 100, p.chat ? ", chat" : "");
  s += "round | ok | cut off | 400 | 503 | unexpected | latency p50 / p99 ms | TTFT p50 / p99 ms | gen tok | wall s | "
       "gen tok/s | KV used after | RSS MiB\n";
  for (size_t i = 0; i < r.rounds.size(); ++i) {
    const LoadRound& x = r.rounds[i];
    s += fmt::format("{} | {} | {} | {} | {} | {} | {:.1f} / {:.1f} | {:.1f} / {:.1f} | {} | {:.2f} | {:.1f} | {} | {:.1f}\n", i + 1,
                     x.ok, x.cut_off, x.bad_400, x.rejected_503, x.unexpected, percentile(x.latency_ms, 0.5),
                     percentile(x.latency_ms, 0.99), percentile(x.ttft_ms, 0.5), percentile(x.ttft_ms, 0.99),
                     x.completion_tokens, x.wall_s, x.wall_s > 0 ? static_cast<double>(x.completion_tokens) / x.wall_s : 0.0,
                     x.kv_blocks_used, x.rss_mb);
  }
  if (r.pass) s += "PASS\n";
  else {
    s += "FAIL\n";
    for (const auto& e : r.problems) s += "  " + e + "\n";
  }
  return s;
}

}  // namespace minfer::server
