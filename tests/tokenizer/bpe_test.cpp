// BPE merging against an independent reference: the merge loop of OpenAI's GPT-2 encoder.py
// (`Encoder.bpe`: take the lowest-rank pair, merge all its occurrences left to right, repeat),
// written here over strings with a std::map of ranks. The library uses a heap over token ids.
#include <gtest/gtest.h>

#include <climits>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "tok_test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

using namespace minfer::tokenizer;

namespace {

struct Reference {
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::unordered_map<std::string, int32_t> ids;

  explicit Reference(const Vocab& v) {
    for (size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], static_cast<int32_t>(i));
    for (size_t i = 0; i < v.merges.size(); ++i) {
      const auto sp = v.merges[i].find(' ');
      ranks.emplace(std::make_pair(v.merges[i].substr(0, sp), v.merges[i].substr(sp + 1)),
                    static_cast<int>(i));
    }
  }

  std::vector<int32_t> encode(std::string_view raw) const {
    std::vector<std::string> word;
    for (char c : raw) word.push_back(byte_to_unicode()[static_cast<uint8_t>(c)]);
    while (word.size() > 1) {
      int best = INT_MAX;
      std::pair<std::string, std::string> bigram;
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        auto it = ranks.find({word[i], word[i + 1]});
        if (it != ranks.end() && it->second < best) {
          best = it->second;
          bigram = it->first;
        }
      }
      if (best == INT_MAX) break;
      std::vector<std::string> next;
      for (size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == bigram.first && word[i + 1] == bigram.second) {
          next.push_back(word[i] + word[i + 1]);
          i += 2;
        } else {
          next.push_back(word[i]);
          ++i;
        }
      }
      word = std::move(next);
    }
    std::vector<int32_t> out;
    for (const auto& w : word) out.push_back(ids.at(w));
    return out;
  }
};

BpeModel make_model(const Vocab& v) {
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.token_types.empty() || v.token_types[i] == TokenType::normal) ids.emplace(v.tokens[i], int32_t(i));
  }
  return BpeModel(v.merges, [&](std::string_view s) {
    auto it = ids.find(std::string(s));
    return it == ids.end() ? -1 : it->second;
  });
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(Bpe, TinyVocabHandWorked) {
  // Merges in rank order: "a a", "b c", "aa b". "aaabc": a a a b c -> (a a) a b c [rank 0, leftmost]
  // -> aa a (b c) [rank 1] -> no "aa a", "a bc" merges: [aa, a, bc].
  Vocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_to_unicode()[b]);
  v.tokens.insert(v.tokens.end(), {"aa", "bc", "aab"});
  v.merges = {"a a", "b c", "aa b"};
  const BpeModel m = make_model(v);
  std::vector<int32_t> out;
  m.encode_word("aaabc", out);
  EXPECT_EQ(out, (std::vector<int32_t>{256, 'a', 257}));  // byte tokens have id = byte value here
  out.clear();
  m.encode_word("aab", out);  // (a a) b -> (aa b)
  EXPECT_EQ(out, (std::vector<int32_t>{258}));
}

class BpeFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(BpeFixture, MatchesGpt2ReferenceOnCorpusAndRandomWords) {
  const auto path = test::fixture("tokenizer/python-bpe8k.tokenizer.json");
  const auto text_path = test::fixture("text/python-val.txt");
  if (path.empty() || text_path.empty()) GTEST_SKIP() << "fixtures not found under " << test::fixtures_dir();
  const Vocab v = test::vocab_from_hf_json(path);
  const Reference ref(v);
  const BpeModel model = make_model(v);

  // Real words from held-out text.
  const std::string text = read_file(text_path).substr(0, 40000);
  PreTokenizer pre;
  int n = 0;
  for (std::string_view w : pre.split(text)) {
    std::vector<int32_t> got;
    model.encode_word(w, got);
    ASSERT_EQ(got, ref.encode(w)) << "word '" << w << "'";
    ++n;
  }
  EXPECT_GT(n, 5000);

  // Random byte strings (any bytes: BPE itself does not need UTF-8), long repetitive ones included.
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string alphabet = std::string("  \n\tse_lfin()=:.") + GetParam();
  for (int i = 0; i < 400; ++i) {
    std::string w;
    const size_t len = 1 + rng() % (i % 10 == 0 ? 300 : 24);
    for (size_t k = 0; k < len; ++k) {
      w.push_back(rng() % 8 == 0 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()]);
    }
    std::vector<int32_t> got;
    model.encode_word(w, got);
    ASSERT_EQ(got, ref.encode(w)) << "random word of " << w.size() << " bytes";
  }
}

INSTANTIATE_TEST_SUITE_P(Alphabets, BpeFixture, ::testing::Values("abcdefg", "xyz0123456789"));

TEST(Bpe, MissingByteTokenIsAnError) {
  Vocab v;
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  const BpeModel m = make_model(v);
  std::vector<int32_t> out;
  m.encode_word("ab", out);
  EXPECT_EQ(out, (std::vector<int32_t>{2}));
  EXPECT_THROW(m.encode_word("abc", out), std::runtime_error);
}
