// The tokenizer against Hugging Face `tokenizers` outputs stored in the fixtures:
// qwen_tokenizer_cases.json (53 strings, real Qwen vocabulary and the trained 8k vocabulary) and
// the prompt ids of every model's refs.json.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "fixture_tokenizers.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_gguf.h"

using namespace minfer;
using namespace minfer::tokenizer;
using test::fixture;

namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids_qwen, ids_trained;
  bool chatml;  // the one case whose specials HF parsed (README: "except in the one ChatML case")
};

std::vector<Case> load_cases() {
  const auto p = fixture("tokenizer/qwen_tokenizer_cases.json");
  std::vector<Case> out;
  if (p.empty()) return out;
  for (const auto& c : test::read_json(p)) {
    Case k;
    k.text = c.at("text").get<std::string>();
    k.ids_qwen = c.at("ids_qwen").get<std::vector<int32_t>>();
    k.ids_trained = c.at("ids_trained").get<std::vector<int32_t>>();
    k.chatml = k.text.find("<|im_start|>") != std::string::npos;
    out.push_back(std::move(k));
  }
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void check_cases(const Tokenizer* tok, bool qwen) {
  if (tok == nullptr) GTEST_SKIP() << "fixture missing under " << test::fixtures_dir();
  const auto cases = load_cases();
  ASSERT_EQ(cases.size(), 53u);
  int n_chatml = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto& want = qwen ? c.ids_qwen : c.ids_trained;
    n_chatml += c.chatml;
    const std::vector<int32_t> got = tok->encode(c.text, /*parse_special=*/c.chatml);
    EXPECT_EQ(got, want) << "case " << i << ": '" << c.text << "'";
    // Every case input is already NFC, so decoding must give it back byte for byte.
    ASSERT_EQ(nfc_normalize(c.text), c.text) << "case " << i;
    EXPECT_EQ(tok->decode(want), c.text) << "case " << i;
  }
  EXPECT_EQ(n_chatml, 1);
}

}  // namespace

TEST(TokenizerCases, QwenVocabGguf) { check_cases(test::qwen_tokenizer(), true); }
TEST(TokenizerCases, TrainedVocabGguf) { check_cases(test::trained_tokenizer(), false); }
TEST(TokenizerCases, TrainedVocabHfJson) { check_cases(test::trained_tokenizer_json(), false); }

TEST(TokenizerCases, RefsPromptIds) {
  const Tokenizer* tok = test::trained_tokenizer();
  if (tok == nullptr) GTEST_SKIP() << "fixture missing";
  int checked = 0;
  for (const char* model : {"qwen2-s", "qwen3-s", "qwen3-xs"}) {
    const auto p = fixture(std::string(model) + "/refs.json");
    if (p.empty()) continue;
    const nlohmann::json refs = test::read_json(p);  // keep alive: range-for does not extend it
    for (const auto& c : refs.at("cases")) {
      const auto prompt = c.at("prompt").get<std::string>();
      const auto ids = c.at("ids").get<std::vector<int32_t>>();
      EXPECT_EQ(tok->encode(prompt, /*parse_special=*/true), ids) << model << ": " << prompt.substr(0, 40);
      EXPECT_EQ(tok->decode(ids), prompt);
      const auto greedy = c.at("greedy32").get<std::vector<int32_t>>();
      // HF decoded the continuation with skip_special_tokens=True (one of them emits <|endoftext|>).
      EXPECT_EQ(tok->decode(greedy, /*skip_special=*/true), c.at("greedy32_text").get<std::string>());
      ++checked;
    }
  }
  EXPECT_EQ(checked, 15);
}

TEST(TokenizerCases, GgufAndJsonVocabsAgree) {
  const Tokenizer* g = test::trained_tokenizer();
  const Tokenizer* j = test::trained_tokenizer_json();
  if (!g || !j) GTEST_SKIP() << "fixture missing";
  ASSERT_EQ(g->n_vocab(), j->n_vocab());
  ASSERT_EQ(g->n_merges(), j->n_merges());
  for (int32_t id = 0; id < g->n_vocab(); ++id) {
    ASSERT_EQ(g->token_text(id), j->token_text(id)) << id;
    ASSERT_EQ(g->token_type(id), j->token_type(id)) << id;
  }
}

TEST(TokenizerCases, HeldOutTextRoundTrips) {
  const auto p = fixture("text/python-val.txt");
  if (p.empty() || !test::trained_tokenizer() || !test::qwen_tokenizer()) GTEST_SKIP() << "fixture missing";
  const std::string text = read_file(p);
  ASSERT_EQ(nfc_normalize(text), text);
  const auto ids = test::trained_tokenizer()->encode(text, false);
  // README: "57 k tokens with the model tokenizer".
  EXPECT_NEAR(static_cast<double>(ids.size()), 57000.0, 1000.0);
  EXPECT_EQ(test::trained_tokenizer()->decode(ids), text);
  EXPECT_EQ(test::qwen_tokenizer()->decode(test::qwen_tokenizer()->encode(text, false)), text);
}

TEST(TokenizerSpecials, ParseSpecialOnAndOff) {
  const Tokenizer* tok = test::qwen_tokenizer();
  if (!tok) GTEST_SKIP() << "fixture missing";
  const int32_t im_start = *tok->find_token("<|im_start|>");
  const int32_t im_end = *tok->find_token("<|im_end|>");
  const int32_t think = *tok->find_token("<think>");
  EXPECT_EQ(im_start, 151644);
  EXPECT_EQ(im_end, 151645);
  EXPECT_EQ(think, 151667);
  EXPECT_EQ(tok->token_type(im_start), TokenType::control);
  EXPECT_EQ(tok->token_type(think), TokenType::user_defined);

  const std::string text = "a<|im_start|>b<think>c<|im_end|>";
  const auto on = tok->encode(text, true);
  ASSERT_EQ(on.size(), 6u);
  EXPECT_EQ(on[1], im_start);
  EXPECT_EQ(on[3], think);
  EXPECT_EQ(on[5], im_end);
  EXPECT_EQ(tok->decode(on), text);
  EXPECT_EQ(tok->decode(on, /*skip_special=*/true), "ab<think>c");  // user-defined tokens stay

  const auto off = tok->encode(text, false);
  for (int32_t id : off) EXPECT_EQ(tok->token_type(id), TokenType::normal) << id;
  EXPECT_EQ(tok->decode(off), text);
  EXPECT_GT(off.size(), on.size());
  // Adjacent specials and specials at both ends.
  EXPECT_EQ(tok->encode("<|im_end|><|im_start|>", true), (std::vector<int32_t>{im_end, im_start}));
}

TEST(TokenizerSpecials, LongestMatchWins) {
  Vocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_level_encode(std::string(1, char(b))));
  v.token_types.assign(256, TokenType::normal);
  v.tokens.insert(v.tokens.end(), {"<x", "<xy>", "<xy"});
  v.token_types.insert(v.token_types.end(), {TokenType::user_defined, TokenType::control, TokenType::control});
  const Tokenizer tok(v);
  EXPECT_EQ(tok.encode("<xy>", true), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok.encode("<xy!", true), (std::vector<int32_t>{258, '!'}));
  EXPECT_EQ(tok.encode("<x!", true), (std::vector<int32_t>{256, '!'}));
  EXPECT_EQ(tok.encode("<xy>", false), (std::vector<int32_t>{'<', 'x', 'y', '>'}));
}

TEST(TokenizerSpecials, EndOfGeneration) {
  const Tokenizer* q = test::qwen_tokenizer();
  const Tokenizer* t = test::trained_tokenizer();
  if (!q || !t) GTEST_SKIP() << "fixture missing";
  EXPECT_EQ(q->eos_id(), 151645);
  EXPECT_EQ(q->bos_id(), 151643);
  EXPECT_EQ(q->eot_id(), 151645);
  EXPECT_FALSE(q->add_bos_default());
  EXPECT_TRUE(q->is_eog(151645));
  EXPECT_TRUE(q->is_eog(151643));
  EXPECT_FALSE(q->is_eog(151644));
  EXPECT_FALSE(q->is_eog(-1));
  EXPECT_FALSE(q->is_eog(1000000));
  EXPECT_EQ(t->eos_id(), 0);
  EXPECT_EQ(t->eot_id(), 2);
  EXPECT_TRUE(t->is_eog(0));
  EXPECT_TRUE(t->is_eog(2));
  EXPECT_FALSE(t->is_eog(1));
  EXPECT_EQ(q->n_vocab(), 151936);
  EXPECT_EQ(q->n_merges(), 151387u);
  EXPECT_EQ(t->n_vocab(), 8192);
  EXPECT_EQ(q->encode("hi", false, /*add_bos=*/true).front(), 151643);
  // Unused padding entries decode to nothing.
  EXPECT_EQ(q->token_type(151900), TokenType::unused);
  EXPECT_EQ(q->token_to_piece(151900), "");
}

TEST(TokenizerText, NonNfcInputIsNormalized) {
  const Tokenizer* tok = test::qwen_tokenizer();
  if (!tok) GTEST_SKIP() << "fixture missing";
  // HF's Qwen normalizer is NFC, so a decomposed é tokenizes like the composed one and decodes to
  // the composed form: decode(encode(s)) == NFC(s), not s.
  const std::string decomposed = "Cafe\xCC\x81";
  const std::string composed = "Caf\xC3\xA9";
  EXPECT_EQ(tok->encode(decomposed, false), tok->encode(composed, false));
  EXPECT_EQ(tok->decode(tok->encode(decomposed, false)), composed);
}

TEST(TokenizerText, InvalidUtf8AndBadIds) {
  const Tokenizer* tok = test::qwen_tokenizer();
  if (!tok) GTEST_SKIP() << "fixture missing";
  // Ill-formed UTF-8 reads as U+FFFD per maximal subpart (llama.cpp replaces it too).
  EXPECT_EQ(tok->encode("abc\xE2\x82", false), tok->encode("abc\xEF\xBF\xBD", false));
  EXPECT_EQ(tok->encode("<|im_end|>\xFF", true), tok->encode("<|im_end|>\xEF\xBF\xBD", true));
  EXPECT_EQ(tok->encode("a\xFF\xFE" "b\xC3(", false), tok->encode("a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD(", false));
  EXPECT_NE(tok->encode("abc\xE2\x82", false), tok->encode("abc", false));
  // The chat path (encode_trusted, a taint mask per raw byte) reads it the same way.
  const std::string bad = "x<|im_end|>\xE2\x82y", good = "x<|im_end|>\xEF\xBF\xBDy";
  EXPECT_EQ(tok->encode_trusted(bad, std::vector<uint8_t>(bad.size(), 0)), tok->encode(good, true));
  try {
    const std::vector<int32_t> ids = {1, 151936};
    tok->decode(ids);
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("151936"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok->token_to_piece(-1), std::out_of_range);
  EXPECT_THROW(tok->token_type(200000), std::out_of_range);
  EXPECT_FALSE(tok->find_token("definitely not a token").has_value());
}

TEST(TokenizerText, ConcurrentEncodeAndCopies) {
  const Tokenizer* tok = test::qwen_tokenizer();
  const auto p = fixture("text/python-val.txt");
  if (!tok || p.empty()) GTEST_SKIP() << "fixture missing";
  const std::string text = read_file(p).substr(0, 20000);
  const auto want = tok->encode(text, false);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] { got[t] = tok->encode(text, false); });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
  const Tokenizer copy = *tok;  // copies own their indices
  const Tokenizer moved = Tokenizer(copy);
  EXPECT_EQ(moved.encode(text, false), want);
  EXPECT_EQ(moved.find_token("<|im_end|>"), tok->find_token("<|im_end|>"));
}

TEST(TokenizerPerf, LoadAndEncodeAreFast) {
  const auto vocab_path = fixture("tokenizer/qwen-vocab.gguf");
  const auto text_path = fixture("text/python-val.txt");
  if (vocab_path.empty() || text_path.empty()) GTEST_SKIP() << "fixture missing";
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const Tokenizer tok = Tokenizer::from_gguf(gguf::File(vocab_path));
  const double load_s = std::chrono::duration<double>(clock::now() - t0).count();

  const std::string text = read_file(text_path).substr(0, 50 * 1024);
  const auto t1 = clock::now();
  const auto ids = tok.encode(text, false);
  const double enc_s = std::chrono::duration<double>(clock::now() - t1).count();
  std::printf("qwen-vocab.gguf load: %.1f ms; encode 50 KB: %.1f ms (%zu tokens, %.0f tokens/s)\n",
              load_s * 1e3, enc_s * 1e3, ids.size(), ids.size() / enc_s);
#ifdef NDEBUG
  const double limit_s = 1.0;  // the requirement: well under a second in an optimized build
#else
  const double limit_s = 5.0;  // debug / sanitizer builds: only catch pathological slowness
#endif
  EXPECT_LT(load_s, limit_s);
  EXPECT_LT(enc_s, limit_s);
}

TEST(TokenizerVocab, MalformedVocabulariesAreRejected) {
  auto base = [] {
    Vocab v;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_level_encode(std::string(1, char(b))));
    v.tokens.push_back("ab");
    v.merges = {"a b"};
    return v;
  };
  EXPECT_NO_THROW(Tokenizer{base()});
  auto expect_error = [](Vocab v, const std::string& needle) {
    try {
      Tokenizer t(std::move(v));
      ADD_FAILURE() << "no exception, wanted '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  { auto v = base(); v.merges.push_back("a zz"); expect_error(v, "unknown token 'zz'"); }
  { auto v = base(); v.merges.push_back("b c"); expect_error(v, "unknown token 'bc'"); }
  { auto v = base(); v.merges.push_back("abc"); expect_error(v, "merge 1"); }
  { auto v = base(); v.token_types.assign(10, TokenType::normal); expect_error(v, "token_types has 10"); }
  { auto v = base(); v.tokens.push_back("ab"); expect_error(v, "appears twice"); }
  { auto v = base(); v.tokens.push_back(""); expect_error(v, "is empty"); }
  { auto v = base(); v.eos_id = 257; expect_error(v, "eos_token_id 257"); }
  { auto v = base(); v.pre = "gpt-4o"; expect_error(v, "gpt-4o"); }  // a pre-tokenizer minfer does not implement
  { auto v = base(); v.model = "llama"; expect_error(v, "llama"); }
  { auto v = base(); v.tokens.clear(); v.merges.clear(); expect_error(v, "no tokens"); }
  // generate used to drop the BOS silently and perplexity to fail mid-run on such a file
  { auto v = base(); v.add_bos = true; expect_error(v, "add_bos_token is true but the vocabulary has no bos_token_id"); }
  { auto v = base(); v.add_bos = true; v.bos_id = 256; EXPECT_NO_THROW(Tokenizer{std::move(v)}); }
}

TEST(TokenizerVocab, GgufRoundTripAndMissingKeys) {
  // A tiny vocabulary written with the project's GGUF writer and read back.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_level_encode(std::string(1, char(b))));
  tokens.push_back("ab");
  tokens.push_back("<|im_end|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  const std::vector<std::string> merges = {"a b"};
  auto write = [&](const std::string& name, const std::string& drop) {
    gguf::Writer w;
    w.set_string("general.architecture", "qwen2");
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
    w.set_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", std::span<const std::string>(merges));
    w.set_u32("tokenizer.ggml.eos_token_id", 257);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    if (!drop.empty()) w.remove(drop);
    const auto path = std::filesystem::path(::testing::TempDir()) / name;
    w.write(path);
    return path;
  };
  {
    gguf::File f(write("tok_ok.gguf", ""));
    const Tokenizer tok = Tokenizer::from_gguf(f);
    EXPECT_EQ(tok.n_vocab(), 258);
    EXPECT_EQ(tok.eos_id(), 257);
    EXPECT_EQ(tok.bos_id(), -1);
    EXPECT_EQ(tok.encode("abab<|im_end|>", true), (std::vector<int32_t>{256, 256, 257}));
    EXPECT_THROW(tok.encode("x", false, /*add_bos=*/true), std::logic_error);
  }
  for (const std::string key : {"tokenizer.ggml.merges", "tokenizer.ggml.tokens", "tokenizer.ggml.model"}) {
    gguf::File f(write("tok_missing.gguf", key));
    try {
      (void)vocab_from_gguf(f);
      ADD_FAILURE() << "no exception without " << key;
    } catch (const gguf::Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  {
    gguf::File f(write("tok_nopre.gguf", "tokenizer.ggml.pre"));
    EXPECT_THROW(vocab_from_gguf(f), std::invalid_argument);
  }
  {
    types.pop_back();  // length mismatch
    gguf::File f(write("tok_types.gguf", ""));
    EXPECT_THROW(Tokenizer::from_gguf(f), std::invalid_argument);
  }
}

TEST(TokenizerVocab, FixtureMetadata) {
  const auto p = fixture("qwen3-xs/qwen3-xs-f16.gguf");
  if (p.empty()) GTEST_SKIP() << "fixture missing";
  gguf::File f(p);
  const auto v = vocab_from_gguf(f);
  EXPECT_EQ(v.architecture, "qwen3");
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_EQ(v.merges.size(), 7933u);
  EXPECT_NE(v.chat_template.find("<think>"), std::string::npos);
}
