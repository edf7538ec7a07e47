// A minfer-server on a loopback port for tests (the default model, CPU), plus clients: httplib's,
// one that timestamps server-sent events, and a raw socket that can hang up whenever it likes.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "conn.h"
#include "server.h"

namespace minfer::test {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

inline examples::Loaded& default_model() {
  static examples::Loaded* m = [] {
    examples::ModelArgs a;
    a.device = "cpu";
    a.threads = 2;
    return new examples::Loaded(examples::load_model(a));
  }();
  return *m;
}

/// The server of these tests: 8 slots, a pool of 8 x 1024 cells in blocks of 16, 2048 per sequence.
inline RunnerParams test_runner_params() {
  RunnerParams rp;
  rp.n_ctx = 8192;
  rp.n_ctx_seq = 2048;
  rp.block_size = 16;
  rp.n_batch = 512;
  return rp;
}

inline server::ServerParams test_server_params() {
  server::ServerParams sp;
  sp.engine.n_parallel = 8;
  sp.engine.queue = 16;
  sp.engine.timeout_s = 120;
  return sp;
}

class TestServer {
 public:
  explicit TestServer(server::ServerParams sp = test_server_params(), RunnerParams rp = test_runner_params()) {
    sp.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lk(log_mu_);
      log_.push_back(line);
    };
    server_ = std::make_unique<server::Server>(default_model(), rp, sp);
    server_->install(http_);
    port_ = server::bind_server(http_, "127.0.0.1", 0);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~TestServer() { stop(); }
  /// What SIGINT / SIGTERM do in minfer-server (Server::stop); returns once the server stopped.
  void stop() {
    if (!thread_.joinable()) return;
    server_->stop(http_, port_);
    thread_.join();
  }
  int port() const { return port_; }
  server::Server& server() { return *server_; }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lk(log_mu_);
    return log_;
  }

  httplib::Client client(double read_timeout_s = 120) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(static_cast<time_t>(read_timeout_s));
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body) const {
    auto c = client();
    return c.Post(path, body, "application/json");
  }
  json post_json(const std::string& path, const json& body) const {
    auto r = post(path, body.dump());
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << body.dump().substr(0, 300) << " -> " << r->body;
    return json::parse(r->body);
  }
  /// /metrics as name -> value (the first sample of each name).
  std::map<std::string, double> metrics() const {
    auto c = client();
    auto r = c.Get("/metrics");
    std::map<std::string, double> m;
    if (!r) return m;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t sp = line.find(' ');
      if (sp != std::string::npos && !m.count(line.substr(0, sp))) m[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    }
    return m;
  }
  /// Waits (up to `limit`) until no request is active or queued; returns the metrics then.
  std::map<std::string, double> idle_metrics(std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) const {
    const auto t0 = Clock::now();
    for (;;) {
      auto m = metrics();
      if ((m["minfer:requests_active"] == 0 && m["minfer:requests_queued"] == 0) || Clock::now() - t0 > limit) return m;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  std::unique_ptr<server::Server> server_;
  server::HttpServer http_;
  std::thread thread_;
  int port_ = 0;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

/// The JSON payloads of a server-sent-event body, "[DONE]" excluded (done says whether it came).
inline std::vector<json> sse_events(const std::string& body, bool* done = nullptr) {
  std::vector<json> out;
  if (done) *done = false;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;  // an event still arriving
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      if (done) *done = true;
      break;
    }
    out.push_back(json::parse(payload));
  }
  return out;
}

/// The text of a streamed completion or chat (choice `index`).
/// The logprobs entries a stream sent, in order: each chunk's logprobs[field] ("content" for chat,
/// "tokens" for completions) concatenated.
inline json sse_logprobs(const std::vector<json>& events, const char* field) {
  json out = json::array();
  for (const json& e : events)
    for (const json& ch : e.value("choices", json::array()))
      if (ch.contains("logprobs") && !ch["logprobs"].is_null())
        for (const json& x : ch["logprobs"][field]) out.push_back(x);
  return out;
}

inline std::string sse_text(const std::vector<json>& events, int index = 0) {
  std::string text;
  for (const json& e : events) {
    for (const json& c : e.value("choices", json::array())) {
      if (c.value("index", -1) != index) continue;
      if (c.contains("text")) text += c["text"].get<std::string>();
      else if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string())
        text += c["delta"]["content"].get<std::string>();
    }
  }
  return text;
}

/// A streamed POST that records when the first text and the end ([DONE]) arrived.
struct TimedStream {
  std::string body;
  Clock::time_point t_sent, t_first_text, t_done;
  bool got_text = false, done = false;
  int status = 0;
};

inline TimedStream timed_stream(int port, const std::string& path, const json& request) {
  TimedStream ts;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = request.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    ts.body.append(data, n);
    if (!ts.got_text) {
      for (const json& e : sse_events(ts.body)) {
        if (!sse_text({e}).empty()) {
          ts.got_text = true;
          ts.t_first_text = Clock::now();
          break;
        }
      }
    }
    if (ts.body.find("data: [DONE]") != std::string::npos) {
      ts.done = true;
      ts.t_done = Clock::now();
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  ts.t_sent = Clock::now();
  c.send(req, res, err);
  ts.status = res.status;
  return ts;
}

/// A plain TCP client speaking just enough HTTP/1.1 to send one request and hang up at will.
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawConn() { close_now(); }
  bool ok() const { return ok_; }
  bool send_raw(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  bool send_post(const std::string& path, const std::string& body) {
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    return ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  /// Reads until `needle` has arrived (true) or the connection ends / 10 s pass (false).
  bool read_until(const std::string& needle) {
    char buf[4096];
    while (got_.find(needle) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return false;
      got_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  /// Reads until the server ends the connection: true for an orderly end (FIN), false for a
  /// reset or 10 s without data.
  bool read_to_end() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return false;
      got_.append(buf, static_cast<size_t>(n));
    }
  }
  const std::string& received() const { return got_; }
  void close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::string got_;
};

/// A long prompt text of distinct lines (about 9 tokens a line with the fixture's tokenizer).
inline std::string long_text(int lines, int salt) {
  std::string s;
  for (int i = 0; i < lines; ++i) s += "value_" + std::to_string(i) + " = compute(" + std::to_string(i * 7 + salt) + ")\n";
  return s;
}

}  // namespace minfer::test
