// Servers with other settings: --api-key, a full queue (503 with Retry-After), --timeout; and the
// engine noticing a hung-up client within one step.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <future>

#include "common/test_util.h"
#include "engine.h"
#include "server_harness.h"

namespace minfer::test {
namespace {

TEST(ServerLimits, ApiKeyIsRequiredButNotForHealth) {
  auto sp = test_server_params();
  sp.api_key = "sekret-42";
  TestServer srv(sp);
  auto c = srv.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  auto none = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["type"], "authentication_error");
  for (const char* path : {"/v1/models", "/metrics"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  auto wrong = c.Post("/v1/completions", {{"Authorization", "Bearer sekret-43"}}, body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto right = c.Post("/v1/completions", {{"Authorization", "Bearer sekret-42"}}, body, "application/json");
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200) << right->body;
  auto lower = c.Post("/v1/completions", {{"Authorization", "bearer sekret-42"}}, body, "application/json");  // RFC 9110
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->status, 200) << lower->body;
  c.set_bearer_token_auth("sekret-42");
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
}

// One slot and no queue: a second request while the first runs gets 503 with Retry-After, and
// is served once the first is done.
TEST(ServerLimits, FullQueueGets503WithRetryAfter) {
  auto sp = test_server_params();
  sp.engine.n_parallel = 1;
  sp.engine.queue = 0;
  TestServer srv(sp);
  RawConn hog(srv.port());
  ASSERT_TRUE(hog.send_post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", -1}, {"ignore_eos", true}, {"stream", true}}.dump()));
  ASSERT_TRUE(hog.read_until("\"text\":"));
  auto r = srv.post("/v1/completions", R"({"prompt": "y", "max_tokens": 2})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "unavailable_error");
  EXPECT_EQ(srv.metrics()["minfer:requests_rejected_total"], 1);
  // n larger than the slots is the client's error, not the server's.
  r = srv.post("/v1/completions", R"({"prompt": "y", "max_tokens": 2, "n": 2})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  hog.close_now();
  srv.idle_metrics();
  r = srv.post("/v1/completions", R"({"prompt": "y", "max_tokens": 2})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// --timeout ends a request that would otherwise run to the end of its context: what it
// generated comes back with finish_reason "length".
TEST(ServerLimits, TimeoutEndsGenerationKeepingTheText) {
  auto sp = test_server_params();
  sp.engine.timeout_s = 0.25;
  TestServer srv(sp);
  const auto t0 = Clock::now();
  auto j = srv.post_json("/v1/completions", {{"prompt", "def f():"}, {"max_tokens", -1}, {"ignore_eos", true}, {"temperature", 0}});
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 2000) << "it ran to the end of the context";
  EXPECT_LT(s, 20.0);
  const auto m = srv.idle_metrics();
  EXPECT_EQ(m.at("minfer:requests_timed_out_total"), 1);
  EXPECT_EQ(m.at("minfer:kv_blocks_used"), 0);
  // Streamed the same way.
  auto r = srv.post("/v1/completions", json{{"prompt", "def g():"}, {"max_tokens", -1}, {"ignore_eos", true}, {"stream", true}}.dump());
  ASSERT_TRUE(r);
  bool done = false;
  const auto events = sse_events(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
}

// Shutting down (SIGINT / SIGTERM: Server::stop) while clients wait: a running and a queued
// plain request get 503 "the server is shutting down" as JSON (not an empty 499, as if they had
// gone away), a running stream its text so far, an error event and [DONE]; a request that
// arrives then gets the same 503.
TEST(ServerLimits, ShutdownAnswersWaitingClientsWith503) {
  auto sp = test_server_params();
  sp.engine.n_parallel = 2;
  sp.engine.queue = 4;
  auto srv = std::make_unique<TestServer>(sp);
  const json endless = {{"prompt", "def f():"}, {"max_tokens", -1}, {"ignore_eos", true}};
  RawConn stream(srv->port());
  json streamed = endless;
  streamed["stream"] = true;
  ASSERT_TRUE(stream.send_post("/v1/completions", streamed.dump()));
  ASSERT_TRUE(stream.read_until("\"text\":"));
  auto running = std::async(std::launch::async, [&] { return srv->post("/v1/completions", endless.dump()); });
  // Both slots busy: the third waits in the queue.
  auto queued = std::async(std::launch::async, [&] { return srv->post("/v1/completions", endless.dump()); });
  auto settled = [&] {
    auto m = srv->metrics();
    return m["minfer:requests_active"] == 2 && m["minfer:requests_queued"] == 1;
  };
  // Latched: asking again after the loop raced with the requests (a request that reached the end
  // of its context between two /metrics reads failed the test on a loaded machine).
  bool ok = false;
  for (int i = 0; i < 2000 && !(ok = settled()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(ok);
  const auto t0 = Clock::now();
  srv->stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  for (auto* f : {&running, &queued}) {
    auto r = f->get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    const json j = json::parse(r->body);
    EXPECT_EQ(j["error"]["message"], "the server is shutting down") << r->body;
    EXPECT_EQ(j["error"]["code"], 503);
  }
  stream.read_until("data: [DONE]");
  bool done = false;
  const std::string& got = stream.received();
  const auto events = sse_events(got.substr(std::min(got.find("data: "), got.size())), &done);
  EXPECT_TRUE(done) << got.substr(got.size() > 400 ? got.size() - 400 : 0);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["error"]["code"], 503) << events.back().dump();
  EXPECT_FALSE(sse_text(events).empty());
  // The stream's access-log line counts the tokens it generated (it said gen=0): at least one
  // per event that carried text.
  int text_events = 0;
  for (const json& e : events) text_events += sse_text({e}).empty() ? 0 : 1;
  std::string line;
  for (int i = 0; i < 100 && line.empty(); ++i) {
    for (const std::string& l : srv->log())
      if (l.find("POST /v1/completions 200 prompt=") != std::string::npos) line = l;
    if (line.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(line.empty()) << "no access-log line for the stream";
  const size_t at = line.find(" gen=");
  ASSERT_NE(at, std::string::npos) << line;
  EXPECT_GE(std::stoi(line.substr(at + 5)), std::max(text_events, 1)) << line << " (" << text_events << " text events)";
}

// A server whose sequences cannot hold a one-word chat and its reply (-np 4 -c 1: one token per
// sequence) refuses to start, saying why, instead of answering every request with 400; a pool
// that holds it starts.
TEST(ServerLimits, TooSmallAContextPerSequenceRefusesToStart) {
  auto sp = test_server_params();
  sp.engine.n_parallel = 4;
  RunnerParams rp = test_runner_params();
  rp.n_ctx = 1;
  rp.n_ctx_seq = 0;  // as minfer-server sets it: min(-c, the model's context)
  const std::string err = error_of([&] { server::Server s(default_model(), rp, sp); });
  EXPECT_NE(err.find("a sequence holds 1 token "), std::string::npos) << err;
  EXPECT_NE(err.find("raise -c"), std::string::npos) << err;
  rp.n_ctx = 64;
  EXPECT_EQ(error_of([&] { server::Server s(default_model(), rp, sp); }), "");
}

// Shutting down does not wait for connections that are only being read: one that sends its
// request slowly (a partial header) and a keep-alive one between requests. Each held its thread
// until the read timeout (120 s here, 600 s by default) or the keep-alive timeout, and the server
// with them.
TEST(ServerLimits, ShutdownDoesNotWaitForSlowOrIdleConnections) {
  auto srv = std::make_unique<TestServer>();
  RawConn slow(srv->port());
  ASSERT_TRUE(slow.send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"));
  RawConn idle(srv->port());
  ASSERT_TRUE(idle.send_raw("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(idle.read_until("{\"status\":\"ok\"}"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both are being read now
  const auto t0 = Clock::now();
  srv->stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
}

// Clients that open connections and send their requests slowly (slowloris) hold a thread each
// while httplib reads; they must not leave none for the others: /health and a completion still
// answer at once with 32 such connections open and --threads-http 4.
TEST(ServerLimits, SlowClientsDoNotStarveOthers) {
  auto sp = test_server_params();
  sp.threads_http = 4;
  TestServer srv(sp);
  std::vector<std::unique_ptr<RawConn>> slow;
  for (int i = 0; i < 32; ++i) {
    slow.push_back(std::make_unique<RawConn>(srv.port()));
    ASSERT_TRUE(slow.back()->send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto c = srv.client(5);
  const auto t0 = Clock::now();
  auto h = c.Get("/health");
  ASSERT_TRUE(h) << "no thread answered /health";
  EXPECT_EQ(h->status, 200);
  auto r = c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
}

// A POST without Content-Length (curl -X POST with no data) has no body: 411 at once, where
// httplib waited for a body until the read timeout; a Content-Length that is not a number gets
// 400 at once, where httplib waited to skip 2^64 bytes. Both as JSON; the server goes on.
TEST(ServerLimits, PostWithoutOrWithABadContentLengthIsAnsweredAtOnce) {
  TestServer srv;
  auto ask = [&](const std::string& head, const char* until = "}}") {  // (the end of a JSON error)
    RawConn c(srv.port());
    EXPECT_TRUE(c.send_raw(head));
    const bool got = c.read_until(until);  // 10 s at most
    EXPECT_TRUE(got) << head << " -> " << c.received();
    return c.received();
  };
  const auto t0 = Clock::now();
  std::string r = ask("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 411", 0), 0u) << r;
  EXPECT_NE(r.find("\"code\":411"), std::string::npos) << r;
  for (const char* cl : {"-5", "99999999999999999999", "12abc"}) {
    r = ask(std::string("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ") + cl + "\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << cl << ": " << r;
    EXPECT_NE(r.find("Content-Length"), std::string::npos) << r;
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  // Chunked bodies and Content-Length: 0 are read as before.
  const std::string body = R"({"content": "x"})";
  r = ask(fmt::format("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body),
          "]}");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  r = ask("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  auto ok = srv.post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

// A stream that fails before its first token gets the status a plain request gets, not a 200
// with an empty choice: one queued while the server shuts down gets 503 as JSON; one that
// waits in the queue past --timeout gets 503 too (or, should it start in time, a real stream).
TEST(ServerLimits, StreamThatFailsBeforeItsFirstTokenGetsItsStatus) {
  auto sp = test_server_params();
  sp.engine.n_parallel = 1;
  sp.engine.timeout_s = 1.0;
  auto srv = std::make_unique<TestServer>(sp);
  const json hog_body = {{"prompt", "x"}, {"max_tokens", -1}, {"ignore_eos", true}, {"stream", true}};
  {
    RawConn hog(srv->port());
    ASSERT_TRUE(hog.send_post("/v1/completions", hog_body.dump()));
    ASSERT_TRUE(hog.read_until("\"text\":"));
    // Its deadline passes while the hog holds the slot, or during its ~2,000-token prefill.
    json late = {{"prompt", std::vector<int>(2000, 7)}, {"max_tokens", 3}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    auto r = srv->post("/v1/completions", late.dump());
    ASSERT_TRUE(r);
    if (r->status == 200) {
      const auto events = sse_events(r->body);
      ASSERT_FALSE(events.empty());
      EXPECT_GT(events.back()["usage"]["completion_tokens"].get<int>(), 0) << "a 200 stream with nothing in it";
    } else {
      EXPECT_EQ(r->status, 503) << r->body;
      EXPECT_EQ(r->get_header_value("Retry-After"), "1");
      EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("--timeout"), std::string::npos) << r->body;
    }
  }
  srv->idle_metrics();
  sp.engine.timeout_s = 120;
  RunnerParams rp = test_runner_params();
  rp.n_ctx_seq = 8192;  // the hog runs for many seconds, not until 2,048 tokens
  srv = std::make_unique<TestServer>(sp, rp);
  RawConn hog(srv->port());
  ASSERT_TRUE(hog.send_post("/v1/completions", hog_body.dump()));
  ASSERT_TRUE(hog.read_until("\"text\":"));
  auto queued = [&](bool chat) {
    json body = {{"max_tokens", 3}, {"stream", true}};
    if (chat) body["messages"] = {{{"role", "user"}, {"content", "hi"}}};
    else body["prompt"] = "y";
    return std::async(std::launch::async, [&srv, chat, body] { return srv->post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump()); });
  };
  auto plain = queued(false), chat = queued(true);
  for (int i = 0; i < 2000 && srv->metrics()["minfer:requests_queued"] < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // (No ASSERT before stop(): the futures would wait for the hog to reach its context's end.)
  const auto m = srv->metrics();
  EXPECT_EQ(m.at("minfer:requests_queued"), 2) << "active " << m.at("minfer:requests_active");
  auto health = srv->client().Get("/health");
  EXPECT_TRUE(health && health->status == 200);
  srv->server().engine().cancel_all();  // what stop() does first: /health says so from then on
  health = srv->client().Get("/health");
  EXPECT_TRUE(health && health->status == 503);
  if (health) {
    EXPECT_EQ(json::parse(health->body).value("status", ""), "shutting down") << health->body;
  }
  srv->stop();
  for (auto* f : {&plain, &chat}) {
    auto r = f->get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("application/json"), std::string::npos);
    EXPECT_EQ(json::parse(r->body)["error"]["message"], "the server is shutting down") << r->body;
  }
}

// --timeout 0 is "none", for the HTTP reads too: a body that comes 6 s after its headers is
// served (httplib's default read timeout of 5 s refused it with a bare 400).
TEST(ServerLimits, NoTimeoutMeansNoHttpReadTimeoutEither) {
  auto sp = test_server_params();
  sp.engine.timeout_s = 0;
  TestServer srv(sp);
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  RawConn c(srv.port());
  ASSERT_TRUE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(6000));
  ASSERT_TRUE(c.send_raw(body));
  ASSERT_TRUE(c.read_until("\"usage\"")) << c.received();
  EXPECT_EQ(c.received().rfind("HTTP/1.1 200", 0), 0u) << c.received();
}

// SIGTERM during startup: Server::stop can run before the listen call has begun (the signal
// waited while the model loaded). It must still stop the server once it listens.
TEST(ServerLimits, StopBeforeListenStillStopsTheServer) {
  server::Server srv(default_model(), test_runner_params(), test_server_params());
  server::HttpServer http;
  srv.install(http);
  const int port = server::bind_server(http, "127.0.0.1", 0);
  ASSERT_GT(port, 0);
  auto stopper = std::async(std::launch::async, [&] { srv.stop(http, port); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // stop() has begun; listen has not
  auto listener = std::async(std::launch::async, [&] { http.listen_after_bind(); });
  const bool ended = listener.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(ended) << "the server went on listening after stop()";
  if (!ended) http.stop();
  listener.wait();
  stopper.wait();
}

// The engine polls every task's connection before each step: after the client hangs up, at most
// the step already under way commits a token, then the request is cancelled and its blocks freed.
TEST(ServerEngine, HangUpIsNoticedWithinOneStep) {
  auto& L = default_model();
  server::Engine engine([&](const RunnerParams& r) { return L.runner(r); }, *L.tok, test_runner_params(),
                        {.n_parallel = 4, .queue = 4});
  // A loopback TCP connection: the task holds the accepted end, the "client" the other.
  const int lsock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lsock, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(lsock, reinterpret_cast<sockaddr*>(&a), &len);
  listen(lsock, 1);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const int server_end = accept(lsock, nullptr, nullptr);
  ASSERT_GE(server_end, 0);

  for (int round = 0; round < 5; ++round) {
    int c = client, s = server_end;
    if (round > 0) {  // fresh connections for the later rounds
      c = socket(AF_INET, SOCK_STREAM, 0);
      ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
      s = accept(lsock, nullptr, nullptr);
    }
    auto t = std::make_shared<server::Task>();
    Request r;
    r.prompt = L.tok->encode("def hang_up():", false);
    r.params.n_predict = -1;
    r.params.stop_at_eog = false;
    r.sampling.temp = 0;
    r.n_logprobs = 0;  // every committed token leaves an entry: a token counter
    t->requests.push_back(r);
    t->fd = s;
    ASSERT_TRUE(engine.submit(t));
    size_t n0 = 0;
    {
      std::unique_lock<std::mutex> lk(t->mu);
      const size_t wait_for = static_cast<size_t>(5 + round * 7);
      t->cv.wait(lk, [&] { return t->choices[0].logprobs.size() >= wait_for || t->done; });
      ASSERT_FALSE(t->done);
      ::close(c);  // while the engine cannot commit a token (it needs this lock)
      n0 = t->choices[0].logprobs.size();
    }
    t->wait();
    std::lock_guard<std::mutex> lk(t->mu);
    EXPECT_TRUE(t->cancelled);
    EXPECT_LE(t->choices[0].result.ids.size(), n0 + 1) << "round " << round;
    EXPECT_GE(t->choices[0].result.ids.size(), n0);
    ::close(s);
  }
  ::close(lsock);
  const auto m = engine.metrics();
  EXPECT_EQ(m.requests_cancelled, 5);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.requests_running, 0);
}

}  // namespace
}  // namespace minfer::test
