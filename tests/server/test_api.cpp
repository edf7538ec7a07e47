// The request parser on its own, and the load generator against a server: a bounded run with
// random lengths, disconnects and malformed requests, ending with every KV block free.
#include <gtest/gtest.h>

#include "api.h"
#include "chat/jinja/json.h"
#include "common/test_util.h"
#include "load.h"
#include "server_harness.h"

namespace minfer::test {
namespace {

TEST(ServerApiParse, JsonShapeSkipsStrings) {
  EXPECT_EQ(server::json_shape("{}").depth, 1);
  EXPECT_EQ(server::json_shape(R"({"a": [1, {"b": [2]}]})").depth, 4);
  EXPECT_EQ(server::json_shape(R"({"a": "[[[[{{{{\"[[["})").depth, 1);
  EXPECT_EQ(server::json_shape(std::string(1000, '[')).depth, 1000);
  EXPECT_EQ(server::json_shape("12").depth, 0);
  // Members of the widest object: commas inside strings and inner arrays do not count.
  EXPECT_EQ(server::json_shape(R"({"a": 1, "b": [1, 2, 3, 4], "c": "x,y,z"})").widest_object, 3u);
  EXPECT_EQ(server::json_shape(R"([{"a": 1}, {"a": 1, "b": 2, "c": {"d": 1, "e": 2, "f": 3, "g": 4}}])").widest_object, 4u);
  EXPECT_EQ(server::json_shape("[1, 2, 3]").widest_object, 0u);
  std::string wide = "{";
  for (int i = 0; i < 5000; ++i) wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  EXPECT_EQ(server::json_shape(wide + "}").widest_object, 5000u);
}

TEST(ServerApiParse, FieldsAndDefaults) {
  const auto& tok = *default_model().tok;
  server::ApiLimits lim;
  lim.n_ctx_seq = 128;
  lim.n_vocab = tok.n_vocab();
  lim.n_parallel = 4;
  lim.max_outputs = 8;
  lim.max_token_bytes = 64;
  lim.sampling.temp = 0.5f;
  auto render = [](const chat::ChatInputs&) -> jinja::Text { throw std::runtime_error("no chat here"); };
  auto parse = [&](const server::json& j) { return server::parse_job(j, false, tok, lim, render); };
  auto job = parse({{"prompt", "abc"}});
  EXPECT_EQ(job.prompts.size(), 1u);
  EXPECT_EQ(job.n, 1);
  EXPECT_EQ(job.gen.n_predict, -1) << "no max_tokens: until the context ends";
  EXPECT_EQ(job.sampling.temp, 0.5f) << "the server's default";
  EXPECT_TRUE(job.gen.stop_at_eog);
  EXPECT_EQ(job.n_logprobs, -1);
  job = parse({{"prompt", {1, 2, 3}}, {"max_tokens", 7}, {"n", 4}, {"temperature", 0}, {"top_k", 5}, {"top_p", 0.9}, {"min_p", 0.1},
               {"presence_penalty", 0.5}, {"frequency_penalty", 0.25}, {"repeat_penalty", 1.1}, {"seed", 9}, {"stop", "x"},
               {"ignore_eos", true}, {"logprobs", 2}, {"cache_prompt", false}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}});
  EXPECT_EQ(job.prompts[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(job.gen.n_predict, 7);
  EXPECT_EQ(job.n, 4);
  EXPECT_EQ(job.sampling.temp, 0.0f);
  EXPECT_EQ(job.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(job.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(job.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(job.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(job.sampling.frequency_penalty, 0.25f);
  EXPECT_FLOAT_EQ(job.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(job.sampling.seed, 9u);
  EXPECT_EQ(job.gen.stop, (std::vector<std::string>{"x"}));
  EXPECT_FALSE(job.gen.stop_at_eog);
  EXPECT_EQ(job.n_logprobs, 2);
  EXPECT_FALSE(job.cache_prompt);
  EXPECT_TRUE(job.stream && job.include_usage);
  // max_completion_tokens wins over max_tokens; n_predict is llama-server's name.
  EXPECT_EQ(parse({{"prompt", "a"}, {"max_tokens", 3}, {"max_completion_tokens", 5}}).gen.n_predict, 5);
  EXPECT_EQ(parse({{"prompt", "a"}, {"n_predict", 6}}).gen.n_predict, 6);
  EXPECT_EQ(parse({{"prompt", "a"}, {"max_tokens", 16.0}}).gen.n_predict, 16) << "an integral float is an integer";
  EXPECT_EQ(parse({{"prompt", "a"}, {"seed", -1}}).sampling.seed, kSeedRandom);
  EXPECT_EQ(parse({{"prompt", {"a", "b"}}, {"n", 2}}).prompts.size(), 2u);
  EXPECT_THROW(parse({{"prompt", {"a", "b", "c"}}, {"n", 3}}), server::BadRequest) << "9 outputs > 8";
  EXPECT_THROW(parse({{"prompt", std::vector<int>(129, 1)}}), server::BadRequest) << "longer than the context";
  EXPECT_NO_THROW(parse({{"prompt", std::vector<int>(128, 1)}})) << "a prompt may fill the context (one token follows)";
  EXPECT_THROW(parse({{"prompt", std::string(128 * 64 * 4 + 1, 'a')}}), server::BadRequest) << "refused by its size";
  EXPECT_THROW(server::parse_job({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, true, tok, lim, render), server::BadRequest)
      << "a template error is the client's";
}

// The limits and parser of these tests: the default model's tokenizer, a 128-token context.
struct Parser {
  const tokenizer::Tokenizer& tok = *default_model().tok;
  server::ApiLimits lim;
  chat::ChatInputs rendered;  // what the last chat request handed the template
  Parser() {
    lim.n_ctx_seq = 128;
    lim.n_vocab = tok.n_vocab();
    lim.n_parallel = 4;
    lim.max_outputs = 8;
    lim.max_token_bytes = 64;
  }
  server::Job completion(const server::json& body) {
    return server::parse_job(body, false, tok, lim, [](const chat::ChatInputs&) -> jinja::Text { return "x"; });
  }
  server::Job chat(const server::json& body) {
    return server::parse_job(body, true, tok, lim, [this](const chat::ChatInputs& in) -> jinja::Text {
      rendered = in;
      return "hello";
    });
  }
  // The BadRequest message parsing `body` gives ("" when it parses).
  std::string refusal(const server::json& body, bool is_chat = false) {
    try {
      is_chat ? chat(body) : completion(body);
    } catch (const server::BadRequest& e) {
      return e.what();
    }
    return "";
  }
};

// llama-server's mixed prompt: token ids and strings in one array are one prompt, concatenated
// in order (BOS only before a leading string); a number that is not a token id is refused naming
// its index and its type, not a valid element.
TEST(ServerApiParse, MixedPromptArraysAreOnePrompt) {
  Parser P;
  auto text = [&](const std::string& s) { return P.tok.encode(s, true); };
  auto cat = [](std::vector<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  auto job = P.completion({{"prompt", {12, 34, "import os"}}});
  ASSERT_EQ(job.prompts.size(), 1u);
  EXPECT_EQ(job.prompts[0], cat({{12, 34}, text("import os")}));
  job = P.completion({{"prompt", {"def f", 5, "(x):"}}});
  ASSERT_EQ(job.prompts.size(), 1u);
  EXPECT_EQ(job.prompts[0], cat({P.tok.with_bos(text("def f")), {5}, text("(x):")}));
  // Nested: one prompt per element, each a string or a (mixed) id array.
  job = P.completion({{"prompt", {server::json{7, "x"}, "y", server::json{8, 9}}}});
  ASSERT_EQ(job.prompts.size(), 3u);
  EXPECT_EQ(job.prompts[0], cat({{7}, text("x")}));
  EXPECT_EQ(job.prompts[2], (std::vector<int32_t>{8, 9}));

  struct Bad {
    server::json prompt;
    std::vector<std::string> says;
  };
  const Bad bad[] = {
      {{5, 1.0}, {"'prompt'[1]", "1.0", "a float"}},
      {{5, "x", 2.5}, {"'prompt'[2]", "a float"}},
      {{5, true}, {"'prompt'[1]", "a boolean"}},
      {{5, server::json::array({1})}, {"'prompt'[1]", "an array"}},
      {{5, P.lim.n_vocab}, {"'prompt'[1]", "outside the vocabulary"}},
      {{"a", server::json::object()}, {"'prompt'[1]", "an object"}},
      {{server::json{1, 2}, server::json{3, 0.5}}, {"'prompt'[1][1]", "a float"}},
  };
  for (const Bad& b : bad) {
    const std::string msg = P.refusal({{"prompt", b.prompt}});
    for (const std::string& s : b.says) EXPECT_NE(msg.find(s), std::string::npos) << b.prompt.dump() << ": " << msg;
    EXPECT_EQ(msg.find("got 5"), std::string::npos) << b.prompt.dump() << " blames a valid element: " << msg;
  }
}

// "content": null (or none) is an assistant turn's privilege (one that calls tools, as OpenAI
// allows); on any other message it is a 400 naming the message, before the template sees it.
TEST(ServerApiParse, NullContentOnlyOnAssistantMessages) {
  Parser P;
  const server::json user_null = {{"role", "user"}, {"content", nullptr}};
  std::string msg = P.refusal({{"messages", {user_null}}}, true);
  EXPECT_EQ(msg, "messages[0] (user): 'content' is null; it must be a string or an array of text parts (only an assistant "
                 "message may have null or no content)");
  msg = P.refusal({{"messages", {{{"role", "user"}}}}}, true);
  EXPECT_NE(msg.find("messages[0] (user): 'content' is missing; it must be a string or an array of text parts"), std::string::npos)
      << msg;
  msg = P.refusal({{"messages", {{{"role", "user"}, {"content", 42}}}}}, true);
  EXPECT_EQ(msg, "messages[0] (user): 'content' must be a string or an array of text parts, got 42") << msg;
  msg = P.refusal({{"messages", {{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "a"}}, user_null}}}, true);
  EXPECT_NE(msg.find("messages[2]"), std::string::npos) << msg;
  msg = P.refusal({{"messages", {{{"role", "system"}, {"content", nullptr}}, {{"role", "user"}, {"content", "a"}}}}}, true);
  EXPECT_NE(msg.find("messages[0]"), std::string::npos) << msg;
  msg = P.refusal({{"messages", {{{"role", "user"}, {"content", "q"}}, {{"role", "tool"}}}}}, true);
  EXPECT_NE(msg.find("messages[1]"), std::string::npos) << msg;
  const server::json call = server::json::array({{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}});
  EXPECT_EQ(P.refusal({{"messages",
                        {{{"role", "user"}, {"content", "q"}},
                         {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", call}},
                         {{"role", "tool"}, {"content", "42"}}}}},
                      true),
            "");
}

// text_offset in characters: a token that begins inside a character (the second byte of "é",
// the second half of an emoji) comes after it; an ill-formed part is the one U+FFFD it becomes,
// also when it was pending (a cut 3-byte lead followed by ASCII).
TEST(ServerApiParse, TextOffsetCountsCodePoints) {
  // The text: a é b 😀 c U+FFFD d U+FFFD A 日 本 z (12 characters).
  const std::pair<std::string, size_t> tokens[] = {
      {"a", 0}, {"\xC3", 1}, {"\xA9", 2}, {"b", 2}, {"\xF0\x9F", 3},
      {"\x98\x80", 4}, {"c", 4}, {"\x80", 5}, {"d", 6}, {"\xE2\x80", 7},
      {"A", 8}, {"", 9}, {"\xE6\x97\xA5\xE6", 9}, {"\x9C\xAC", 11}, {"z", 11}};
  server::TextOffset off;
  for (size_t i = 0; i < std::size(tokens); ++i) EXPECT_EQ(off.next(tokens[i].first), tokens[i].second) << "token " << i;
  EXPECT_EQ(off.chars, 12u);
  EXPECT_TRUE(off.pending.empty());
}

// tool_choice: "auto" (and no tool_choice) hands the tools to the template, "none" does not;
// "required" and a named function are refused (minfer cannot force a call).
TEST(ServerApiParse, ToolChoice) {
  Parser P;
  const server::json tools = server::json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  const server::json msgs = {{{"role", "user"}, {"content", "hi"}}};
  P.chat({{"messages", msgs}, {"tools", tools}});
  EXPECT_FALSE(P.rendered.tools.is_undefined());
  P.chat({{"messages", msgs}, {"tools", tools}, {"tool_choice", "auto"}});
  EXPECT_FALSE(P.rendered.tools.is_undefined());
  P.chat({{"messages", msgs}, {"tools", tools}, {"tool_choice", "none"}});
  EXPECT_TRUE(P.rendered.tools.is_undefined()) << "tool_choice none: the template must not see the tools";
  std::string msg = P.refusal({{"messages", msgs}, {"tools", tools}, {"tool_choice", "required"}}, true);
  EXPECT_NE(msg.find("'tool_choice'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
  msg = P.refusal({{"messages", msgs}, {"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}}, true);
  EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
  EXPECT_NE(P.refusal({{"messages", msgs}, {"tools", tools}, {"tool_choice", "sometimes"}}, true), "");
  EXPECT_NE(P.refusal({{"messages", msgs}, {"tools", tools}, {"tool_choice", 1}}, true), "");
}

// The deprecated `functions` / `function_call` are `tools` / `tool_choice` in the API's earlier
// spelling: the template sees the same tools, "none" hides them, a forced call is refused naming
// the field given, and a request may not give both spellings.
TEST(ServerApiParse, LegacyFunctionsAreTools) {
  Parser P;
  const server::json fn = {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}};
  const server::json msgs = {{{"role", "user"}, {"content", "hi"}}};
  P.chat({{"messages", msgs}, {"tools", server::json::array({{{"type", "function"}, {"function", fn}}})}});
  const std::string want = jinja::to_json(P.rendered.tools).s;
  P.rendered = {};
  P.chat({{"messages", msgs}, {"functions", server::json::array({fn})}});
  EXPECT_EQ(jinja::to_json(P.rendered.tools).s, want);
  P.chat({{"messages", msgs}, {"functions", server::json::array({fn})}, {"function_call", "none"}});
  EXPECT_TRUE(P.rendered.tools.is_undefined());
  std::string msg = P.refusal({{"messages", msgs}, {"functions", server::json::array({fn})}, {"function_call", {{"name", "get_weather"}}}}, true);
  EXPECT_NE(msg.find("'function_call' naming a function"), std::string::npos) << msg;
  msg = P.refusal({{"messages", msgs}, {"functions", server::json::array({fn})}, {"tools", server::json::array()}}, true);
  EXPECT_NE(msg.find("not both"), std::string::npos) << msg;
  msg = P.refusal({{"messages", msgs}, {"function_call", "auto"}, {"tool_choice", "auto"}}, true);
  EXPECT_NE(msg.find("not both"), std::string::npos) << msg;
  EXPECT_NE(P.refusal({{"messages", msgs}, {"functions", fn}}, true).find("'functions' must be an array"), std::string::npos);
}

// Fields the OpenAI API types strictly are refused when they do not fit it: tools that are not
// function objects, stream_options without stream, a non-string model; and a conversation of more
// messages than the context has tokens is refused before it is converted or rendered.
TEST(ServerApiParse, ToolsStreamOptionsModelAndMessageCountAreChecked) {
  Parser P;
  const server::json msgs = {{{"role", "user"}, {"content", "hi"}}};
  for (const server::json& tools : {server::json::array({1, 2}), server::json::array({{{"type", "function"}}}),
                                    server::json::array({{{"type", "retrieval"}, {"function", {{"name", "f"}}}}}),
                                    server::json::array({{{"function", {{"name", 3}}}}})}) {
    const std::string msg = P.refusal({{"messages", msgs}, {"tools", tools}}, true);
    EXPECT_NE(msg.find("tools[0] must be"), std::string::npos) << tools.dump() << ": " << msg;
  }
  EXPECT_NE(P.refusal({{"messages", msgs}, {"functions", server::json::array({"f"})}}, true).find("tools[0] must be"),
            std::string::npos);
  EXPECT_EQ(P.refusal({{"messages", msgs}, {"tools", server::json::array({{{"function", {{"name", "f"}}}}})}}, true), "")
      << "type defaults to function";
  EXPECT_NE(P.refusal({{"prompt", "a"}, {"stream_options", {{"include_usage", true}}}}).find("only allowed when 'stream'"),
            std::string::npos);
  EXPECT_EQ(P.refusal({{"prompt", "a"}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}), "");
  EXPECT_NE(P.refusal({{"prompt", "a"}, {"model", 5}}).find("'model' must be a string"), std::string::npos);
  EXPECT_EQ(P.refusal({{"prompt", "a"}, {"model", "any"}}), "");
  server::json m129 = server::json::array();
  for (int i = 0; i < 129; ++i) m129.push_back({{"role", "user"}, {"content", ""}});
  const std::string msg = P.refusal({{"messages", m129}}, true);
  EXPECT_NE(msg.find("holds 129 messages"), std::string::npos) << msg;
  m129.erase(m129.begin());
  EXPECT_EQ(P.refusal({{"messages", m129}}, true), "") << "128 messages may fit a 128-token context";
}

// llama-server's assistant prefill: a conversation ending with an assistant message is rendered
// without it, with the generation prompt, and its text starts the reply; --no-prefill-assistant
// renders it as a finished turn. Two assistant messages at the end are refused.
TEST(ServerApiParse, FinalAssistantMessageIsTheStartOfTheReply) {
  Parser P;
  const server::json user = {{"role", "user"}, {"content", "Write def"}};
  const server::json asst = {{"role", "assistant"}, {"content", "def foo("}};
  const auto prompt = [&](const server::Job& j) { return P.tok.decode(j.prompts.at(0)); };
  server::Job j = P.chat({{"messages", {user, asst}}, {"add_generation_prompt", false}});
  EXPECT_EQ(P.rendered.messages.list->size(), 1u);
  EXPECT_TRUE(P.rendered.add_generation_prompt);
  EXPECT_NE(prompt(j).find("hellodef foo("), std::string::npos) << prompt(j);
  const server::json parts = {{"role", "assistant"}, {"content", {{{"type", "text"}, {"text", "def "}}, {{"type", "text"}, {"text", "bar("}}}}};
  j = P.chat({{"messages", {user, parts}}});
  EXPECT_NE(prompt(j).find("hellodef \nbar("), std::string::npos) << "text parts joined as everywhere: " << prompt(j);
  EXPECT_NE(P.refusal({{"messages", {user, asst, asst}}}, true).find("two assistant messages"), std::string::npos);
  const server::json call = {{"role", "assistant"}, {"content", nullptr},
                             {"tool_calls", {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}};
  j = P.chat({{"messages", {user, call}}});
  EXPECT_EQ(P.rendered.messages.list->size(), 2u) << "a tool-call turn is kept, not continued";
  P.lim.prefill_assistant = false;
  j = P.chat({{"messages", {user, asst}}});
  EXPECT_EQ(P.rendered.messages.list->size(), 2u);
  EXPECT_EQ(prompt(j), "hello");
}

TEST(ServerApiParse, PercentileIsNearestRank) {
  EXPECT_EQ(server::percentile({}, 0.5), 0);
  EXPECT_EQ(server::percentile({5}, 0.99), 5);
  EXPECT_EQ(server::percentile({1, 2, 3, 4}, 0.5), 2);
  EXPECT_EQ(server::percentile({4, 3, 2, 1}, 0.99), 4);
  std::vector<double> xs;
  for (int i = 1; i <= 100; ++i) xs.push_back(i);
  EXPECT_EQ(server::percentile(xs, 0.99), 99);
}

// A small version of scripts/server_load.sh's run: it must pass (no unexpected status, malformed
// ones 400, every KV block free after each round, RSS steady between rounds).
TEST(ServerLoad, BoundedRunWithDisconnectsAndMalformedRequestsLeavesNothingBehind) {
  auto sp = test_server_params();
  sp.engine.n_parallel = 4;
  sp.engine.queue = 64;
  sp.access_log = false;
  TestServer srv(sp);
  server::LoadParams p;
  p.port = srv.port();
  p.clients = 8;
  p.requests = 6;
  p.rounds = 2;
  p.prompt_min = 2;
  p.prompt_max = 120;
  p.out_min = 1;
  p.out_max = 24;
  p.shared_prefix = 40;
  p.disconnect = 0.15;
  p.malformed = 0.15;
  p.seed = seed();
  const auto rep = server::run_load(p);
  const std::string text = server::format_report(p, rep);
  std::printf("%s", text.c_str());
  EXPECT_TRUE(rep.pass) << text;
  int64_t ok = 0, bad = 0;
  for (const auto& r : rep.rounds) {
    ok += r.ok;
    bad += r.bad_400;
    EXPECT_EQ(r.kv_blocks_used, 0);
    EXPECT_EQ(r.unexpected, 0);
  }
  EXPECT_GT(ok, 0);
  const auto m = srv.idle_metrics();
  EXPECT_EQ(m.at("minfer:kv_blocks_used"), 0);
  EXPECT_GT(m.at("minfer:prefix_cache_hit_tokens_total"), 0) << "the shared prefix was never reused";
}

}  // namespace
}  // namespace minfer::test
