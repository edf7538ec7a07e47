// The HTTP API end to end on a local port: completions (plain and streamed), chat, models,
// health, and every kind of bad request answered with 400 and a message.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/generate.h"
#include "server.h"

namespace minfer::test {
namespace {

using json = nlohmann::json;

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    examples::ModelArgs a;
    a.device = "cpu";
    a.threads = 2;
    loaded_ = new examples::Loaded(examples::load_model(a));
    SessionParams sp;
    sp.n_ctx = 256;
    server_ = new server::Server(*loaded_, sp, {});
    http_ = new httplib::Server;
    server_->install(*http_);
    port_ = http_->bind_to_any_port("127.0.0.1");
    thread_ = new std::thread([] { http_->listen_after_bind(); });
    while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  static void TearDownTestSuite() {
    http_->stop();
    thread_->join();
    delete thread_;
    delete http_;
    delete server_;
    delete loaded_;
  }
  httplib::Client client() { return httplib::Client("127.0.0.1", port_); }
  httplib::Result post(const std::string& path, const std::string& body) {
    auto c = client();
    c.set_read_timeout(60);
    return c.Post(path, body, "application/json");
  }

  static inline examples::Loaded* loaded_ = nullptr;
  static inline server::Server* server_ = nullptr;
  static inline httplib::Server* http_ = nullptr;
  static inline std::thread* thread_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(ServerTest, HealthAndModels) {
  auto c = client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  auto j = json::parse(m->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_FALSE(j["data"][0]["id"].get<std::string>().empty());
}

TEST_F(ServerTest, GreedyCompletionEqualsTheGenerationLoop) {
  const std::string prompt = "def fibonacci(n):\n    ";
  auto r = post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}}.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  // The same request through the library directly.
  Session s(*loaded_->model, *loaded_->backend, SessionParams{256});
  SamplerParams sp;
  sp.temp = 0;
  Sampler sampler(sp);
  GenerateParams gp;
  gp.n_predict = 12;
  auto ids = loaded_->tok->encode(prompt, false);
  auto ref = generate(s, *loaded_->tok, sampler, ids, gp);
  EXPECT_EQ(j["choices"][0]["text"].get<std::string>(), ref.text);
  // Again: the cached prefix is reused and the answer is the same.
  auto again = json::parse(post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}}.dump())->body);
  EXPECT_EQ(again["choices"][0]["text"], j["choices"][0]["text"]);
}

TEST_F(ServerTest, ChatCompletionAndStopString) {
  auto r = post("/v1/chat/completions",
                json{{"messages", {{{"role", "user"}, {"content", "Write a function."}}}}, {"max_tokens", 10}, {"seed", 7}}.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  auto s = json::parse(post("/v1/completions", json{{"prompt", "import os\n"}, {"max_tokens", 40}, {"temperature", 0}, {"stop", "\n"}}.dump())->body);
  EXPECT_EQ(s["choices"][0]["text"].get<std::string>().find('\n'), std::string::npos);
}

TEST_F(ServerTest, StreamingSendsEventsThenDone) {
  auto r = post("/v1/completions", json{{"prompt", "class A:\n"}, {"max_tokens", 6}, {"temperature", 0}, {"stream", true}}.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  std::string text;
  int events = 0;
  size_t pos = 0;
  bool done = false;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    const std::string payload = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      done = true;
      break;
    }
    auto j = json::parse(payload);
    text += j["choices"][0]["text"].get<std::string>();
    ++events;
  }
  EXPECT_TRUE(done);
  EXPECT_GE(events, 2);
  auto plain = json::parse(post("/v1/completions", json{{"prompt", "class A:\n"}, {"max_tokens", 6}, {"temperature", 0}}.dump())->body);
  EXPECT_EQ(text, plain["choices"][0]["text"].get<std::string>());
}

TEST_F(ServerTest, BadRequestsGet400WithAMessage) {
  const std::pair<std::string, std::string> cases[] = {
      {"/v1/completions", "not json"},
      {"/v1/completions", "[1, 2]"},
      {"/v1/completions", R"({"max_tokens": 5})"},
      {"/v1/completions", R"({"prompt": 5})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "many"})"},
      {"/v1/completions", R"({"prompt": "x", "temperature": -1})"},
      {"/v1/completions", R"({"prompt": "x", "stop": 3})"},
      {"/v1/completions", json{{"prompt", std::string(4000, 'x') + " y z"}}.dump()},
      {"/v1/chat/completions", R"({"messages": []})"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user"}]})"},
      {"/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "hi"}]})"},
  };
  for (const auto& [path, body] : cases) {
    auto r = post(path, body);
    ASSERT_TRUE(r) << body;
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    auto j = json::parse(r->body);
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << body;
  }
  // The server still works afterwards.
  auto ok = post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

}  // namespace
}  // namespace minfer::test
