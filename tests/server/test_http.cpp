// The HTTP layer under the API (examples/server/http.h) over raw loopback sockets: requests
// pipelined on one connection are all answered in order, a connection the server ends is ended
// cleanly (Connection: close, then FIN, not a reset), bodies that cannot be framed or are too
// large are refused unread, and CORS as llama-server's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "server_harness.h"

namespace minfer::test {
namespace {

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// The responses in a byte stream received on one connection, in order (Content-Length or chunked
// bodies; a 204 has none). Stops at the first incomplete one.
std::vector<RawResponse> parse_responses(const std::string& s) {
  std::vector<RawResponse> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t head_end = s.find("\r\n\r\n", pos);
    if (head_end == std::string::npos || s.compare(pos, 9, "HTTP/1.1 ") != 0) break;
    RawResponse r;
    r.status = std::stoi(s.substr(pos + 9, 3));
    for (size_t line = s.find("\r\n", pos) + 2; line < head_end;) {
      const size_t eol = s.find("\r\n", line);
      const std::string h = s.substr(line, eol - line);
      const size_t colon = h.find(':');
      std::string name = h.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      r.headers[name] = h.substr(colon + 2);
      line = eol + 2;
    }
    pos = head_end + 4;
    if (r.headers.count("content-length")) {
      const size_t n = std::stoul(r.headers["content-length"]);
      if (pos + n > s.size()) break;
      r.body = s.substr(pos, n);
      pos += n;
    } else if (r.headers["transfer-encoding"] == "chunked") {
      for (;;) {
        const size_t eol = s.find("\r\n", pos);
        if (eol == std::string::npos) return out;
        const size_t n = std::stoul(s.substr(pos, eol - pos), nullptr, 16);
        if (eol + 2 + n + 2 > s.size()) return out;
        r.body += s.substr(eol + 2, n);
        pos = eol + 2 + n + 2;
        if (n == 0) break;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return fmt::format("POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{}Content-Length: {}\r\n\r\n{}", path,
                     extra, body.size(), body);
}
std::string get(const std::string& path, const std::string& extra = "") {
  return fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}\r\n", path, extra);
}

class ServerHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { srv_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  static TestServer& srv() { return *srv_; }
  static inline TestServer* srv_ = nullptr;
};

// Four requests written back to back before any answer is read — a completion, a streamed
// completion, /health, /tokenize (the last asks to close) — get four answers in that order, each
// what the request alone gets. httplib 0.11 answered the first only: the others were in the
// first request's read buffer when it was dropped, and the connection closed 5 s later.
TEST_F(ServerHttp, PipelinedRequestsAreAnsweredInOrder) {
  const json plain = {{"prompt", "import os\n"}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}};
  const json streamed = {{"prompt", "def f(x):\n"}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}};
  const json plain_alone = srv().post_json("/v1/completions", plain);
  json streamed_as_plain = streamed;
  streamed_as_plain.erase("stream");
  const json streamed_alone = srv().post_json("/v1/completions", streamed_as_plain);

  RawConn c(srv().port());
  ASSERT_TRUE(c.ok());
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.send_raw(post("/v1/completions", plain.dump()) + post("/v1/completions", streamed.dump()) + get("/health") +
                         post("/tokenize", R"({"content": "import os"})", "Connection: close\r\n")));
  EXPECT_TRUE(c.read_to_end()) << c.received();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 4.0) << "the server waited out its keep-alive timeout";
  const auto rs = parse_responses(c.received());
  ASSERT_EQ(rs.size(), 4u) << c.received();
  for (const auto& r : rs) EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(rs[0].body)["choices"][0]["text"], plain_alone["choices"][0]["text"]);
  bool done = false;
  EXPECT_EQ(sse_text(sse_events(rs[1].body, &done)), streamed_alone["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(done);
  EXPECT_EQ(json::parse(rs[2].body)["status"], "ok");
  EXPECT_EQ(json::parse(rs[3].body)["tokens"], srv().post_json("/tokenize", {{"content", "import os"}})["tokens"]);
  EXPECT_EQ(rs[3].headers.at("connection"), "close");
}

// A request whose bytes arrive split across the previous request's read: the first request and
// the head and half the body of the second in one write, the rest later.
TEST_F(ServerHttp, PipelinedRequestArrivingInPiecesIsAnswered) {
  const std::string second = post("/tokenize", R"({"content": "def main():"})", "Connection: close\r\n");
  const size_t cut = second.size() - 8;
  RawConn c(srv().port());
  ASSERT_TRUE(c.send_raw(get("/health") + second.substr(0, cut)));
  ASSERT_TRUE(c.read_until("{\"status\":\"ok\"}")) << c.received();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(c.send_raw(second.substr(cut)));
  EXPECT_TRUE(c.read_to_end()) << c.received();
  const auto rs = parse_responses(c.received());
  ASSERT_EQ(rs.size(), 2u) << c.received();
  EXPECT_EQ(json::parse(rs[1].body)["tokens"], srv().post_json("/tokenize", {{"content", "def main():"}})["tokens"]);
}

// Past the keep-alive limit (100 requests a connection) the last answer says "Connection: close"
// and the connection ends with a FIN although requests were left unread: the server reads and
// drops them before closing, so the kernel does not reset the connection under the answers.
TEST_F(ServerHttp, KeepAliveLimitEndsTheConnectionCleanly) {
  std::string burst;
  for (int i = 0; i < 103; ++i) burst += get("/health");
  RawConn c(srv().port());
  ASSERT_TRUE(c.send_raw(burst));
  EXPECT_TRUE(c.read_to_end()) << "reset after " << parse_responses(c.received()).size() << " answers";
  const auto rs = parse_responses(c.received());
  ASSERT_EQ(rs.size(), 100u);
  EXPECT_EQ(rs.back().headers.at("connection"), "close");
  EXPECT_EQ(rs.back().headers.count("keep-alive"), 0u);
  EXPECT_EQ(rs[98].headers.count("connection"), 0u);
}

// A response that says "Connection: close" ends the connection (httplib 0.11 kept it open, read
// on and sent a contradicting Keep-Alive header): a Content-Length that is not a number leaves
// the body's end unknown, and a request httplib cannot parse leaves where the next one begins
// unknown. A request written after either is not read as one.
TEST_F(ServerHttp, ResponsesThatCloseEndTheConnection) {
  for (const std::string& bad : {std::string("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 12abc\r\n\r\n"),
                                 std::string("NONSENSE\r\n\r\n"), std::string("GET /health HTTP/7.0\r\n\r\n")}) {
    RawConn c(srv().port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.send_raw(bad + get("/health")));
    EXPECT_TRUE(c.read_to_end()) << bad;
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0) << bad << ": closed by the keep-alive timeout";
    const auto rs = parse_responses(c.received());
    ASSERT_EQ(rs.size(), 1u) << bad << " -> " << c.received();
    EXPECT_EQ(rs[0].status, 400) << bad;
    EXPECT_EQ(rs[0].headers.at("connection"), "close") << bad;
    EXPECT_EQ(rs[0].headers.count("keep-alive"), 0u) << bad;
    EXPECT_TRUE(json::parse(rs[0].body).contains("error")) << bad;
  }
}

// Bodies the HTTP library would mishandle are refused before any of them is read, and the
// connection ends there, so no byte of them is parsed as a request (request smuggling): a
// malformed chunk, a body on a GET, both Content-Length and Transfer-Encoding, two Content-Lengths
// that disagree, an unknown transfer coding, a body for a method or path that takes none. Each
// gets one JSON answer, then FIN; the request hidden behind it is never answered.
TEST_F(ServerHttp, BodiesThatCannotBeFramedEndTheConnectionUnread) {
  const std::string hidden = get("/v1/models");
  struct Case {
    std::string request;
    int status;
  };
  const Case cases[] = {
      {"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + hidden, 400},
      {"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n" + hidden, 400},
      {fmt::format("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", hidden.size(), hidden), 400},
      {"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
           fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", hidden.size(), hidden),
       400},
      {fmt::format("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                   hidden.size(), hidden),
       400},
      {"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + hidden, 501},
      {fmt::format("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nContent-Length: {}\r\n\r\n"
                   "{{\"content\": \"x\"}}{}",
                   16 + hidden.size(), hidden),
       400},
      {fmt::format("PUT /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                   hidden.size(), hidden),
       405},
      {fmt::format("POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", hidden.size(), hidden), 405},
      {fmt::format("POST /no/such/path HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", hidden.size(), hidden), 404},
  };
  for (const Case& c : cases) {
    RawConn conn(srv().port());
    ASSERT_TRUE(conn.send_raw(c.request));
    EXPECT_TRUE(conn.read_to_end()) << c.request;
    const auto rs = parse_responses(conn.received());
    ASSERT_EQ(rs.size(), 1u) << c.request << " -> " << conn.received();
    EXPECT_EQ(rs[0].status, c.status) << c.request << " -> " << rs[0].body;
    EXPECT_EQ(rs[0].headers.at("connection"), "close") << c.request;
    EXPECT_TRUE(json::parse(rs[0].body).contains("error")) << c.request;
  }
  // A well-formed chunked body is read as before, and the connection goes on.
  const std::string body = R"({"content": "x"})";
  RawConn conn(srv().port());
  ASSERT_TRUE(conn.send_raw(fmt::format("POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                                        body.size(), body) + get("/health", "Connection: close\r\n")));
  EXPECT_TRUE(conn.read_to_end());
  const auto rs = parse_responses(conn.received());
  ASSERT_EQ(rs.size(), 2u) << conn.received();
  EXPECT_EQ(rs[0].status, 200) << rs[0].body;
  EXPECT_TRUE(json::parse(rs[0].body).contains("tokens"));
  EXPECT_EQ(rs[1].status, 200);
}

// --max-body holds for chunked bodies too (httplib 0.11 reads those without a limit: 300 MB went
// into memory), and the API key is checked before any body byte is read: a client without it
// gets 401 while its endless chunked upload is still coming.
TEST(ServerBodies, ChunkedBodyPastMaxBodyAndUnauthorizedBodiesAreNotRead) {
  auto sp = test_server_params();
  sp.max_body = 4096;
  sp.api_key = "sekret-42";
  TestServer srv(sp);
  const std::string chunk = fmt::format("400\r\n{}\r\n", std::string(1024, ' '));
  {
    RawConn c(srv.port());
    ASSERT_TRUE(c.send_raw("POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret-42\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n"));
    for (int i = 0; i < 64 && c.send_raw(chunk); ++i) {
    }
    EXPECT_TRUE(c.read_until("}}")) << c.received();
    EXPECT_EQ(c.received().rfind("HTTP/1.1 413", 0), 0u) << c.received();
    EXPECT_NE(c.received().find("--max-body"), std::string::npos) << c.received();
  }
  {
    RawConn c(srv.port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk));
    EXPECT_TRUE(c.read_until("}}")) << c.received();  // no terminating chunk was sent
    EXPECT_EQ(c.received().rfind("HTTP/1.1 401", 0), 0u) << c.received();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  }
  // Within the limit and with the key: served.
  const std::string body = R"({"content": "x"})";
  RawConn c(srv.port());
  ASSERT_TRUE(c.send_raw(fmt::format("POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret-42\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                                     body.size(), body)));
  EXPECT_TRUE(c.read_until("]}")) << c.received();
  EXPECT_EQ(c.received().rfind("HTTP/1.1 200", 0), 0u) << c.received();
}

// CORS as llama-server: every response allows any origin; an OPTIONS preflight to an API path
// gets 204 with the methods the path takes and the headers the browser asked to send — without
// the API key, which a preflight never carries. Unknown paths still get 404.
TEST(ServerCors, PreflightNeedsNoKeyAndEveryResponseAllowsAnyOrigin) {
  auto sp = test_server_params();
  sp.api_key = "sekret-42";
  TestServer srv(sp);
  auto c = srv.client();
  const httplib::Headers preflight = {{"Origin", "http://localhost:3000"},
                                      {"Access-Control-Request-Method", "POST"},
                                      {"Access-Control-Request-Headers", "authorization, content-type"}};
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/chat/completions", "/tokenize", "/detokenize"}) {
    auto r = c.Options(path, preflight);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 204) << path << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*") << path;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "POST, OPTIONS") << path;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type") << path;
    EXPECT_TRUE(r->body.empty()) << path;
  }
  {  // the headers a client adds of its own (the OpenAI SDK's X-Stainless-*) are allowed; a
     // malformed list gets the server's own
    httplib::Headers sdk = preflight;
    sdk.erase("Access-Control-Request-Headers");
    sdk.emplace("Access-Control-Request-Headers", "authorization,content-type,x-stainless-os,x-stainless-retry-count");
    auto r = c.Options("/v1/chat/completions", sdk);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization,content-type,x-stainless-os,x-stainless-retry-count");
    sdk.erase("Access-Control-Request-Headers");
    sdk.emplace("Access-Control-Request-Headers", "x-ok, (bad)");
    r = c.Options("/v1/chat/completions", sdk);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "Authorization, Content-Type, X-Api-Key");
  }
  for (const char* path : {"/v1/models", "/v1/models/anything", "/health", "/metrics"}) {
    auto r = c.Options(path, preflight);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 204) << path;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "GET, HEAD, OPTIONS") << path;
  }
  // The raw preflight answer: no body and no Content-Length (RFC 9110 for a 204).
  RawConn raw(srv.port());
  ASSERT_TRUE(raw.send_raw("OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://x\r\n"
                           "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(raw.read_to_end());
  EXPECT_EQ(raw.received().rfind("HTTP/1.1 204", 0), 0u) << raw.received();
  EXPECT_EQ(raw.received().find("Content-Length"), std::string::npos) << raw.received();
  EXPECT_EQ(raw.received().substr(raw.received().size() - 4), "\r\n\r\n") << raw.received();
  // The calls themselves: the answer allows any origin, refusals and streams included.
  const httplib::Headers origin = {{"Origin", "http://localhost:3000"}};
  auto refused = c.Get("/v1/models", origin);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(refused->get_header_value("Access-Control-Allow-Origin"), "*");
  c.set_bearer_token_auth("sekret-42");
  auto models = c.Get("/v1/models", origin);
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), "*");
  for (bool stream : {false, true}) {
    auto r = c.Post("/v1/chat/completions", origin,
                    json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}, {"stream", stream}}.dump(),
                    "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*") << "stream " << stream;
  }
  auto missing = c.Options("/v2/nothing", preflight);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("Access-Control-Allow-Origin"), "*");
}

}  // namespace
}  // namespace minfer::test
