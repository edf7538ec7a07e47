#include "quantize/vocab_kv.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string_view>

#include "gguf/gguf.h"

namespace minfer::quantize {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Printable ASCII, common English letters first, so the early merges look like real ones.
constexpr std::string_view kSeedChars =
    " etaoinsrhldcumfpgwybvkxjqzETAOINSRHLDCUMFPGWYBVKXJQZ0123456789"
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
static_assert(kSeedChars.size() == 95);

constexpr std::string_view kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

}  // namespace

std::string byte_to_token_text(uint8_t b) {
  // GPT-2 bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
  // map to U+0100.. in byte order.
  auto printable = [](int c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255); };
  if (printable(b)) return utf8(b);
  uint32_t n = 0;
  for (int c = 0; c < b; ++c)
    if (!printable(c)) ++n;
  return utf8(256 + n);
}

SyntheticVocab synthetic_vocab(int32_t n_vocab) {
  constexpr int64_t kSeed = static_cast<int64_t>(kSeedChars.size());
  constexpr int64_t kMax = 256 + kSeed * kSeed + kSeed * kSeed * kSeed * kSeed + 3;
  if (n_vocab < 259 || n_vocab > kMax)
    throw std::invalid_argument(fmt::format(
        "synthetic vocabulary: n_vocab {} must be in [259, {}] (256 byte tokens + 3 special tokens + fillers)", n_vocab, kMax));
  SyntheticVocab v;
  v.tokens.reserve(static_cast<size_t>(n_vocab));
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_to_token_text(static_cast<uint8_t>(b)));
  const int64_t n_fill = n_vocab - 3 - 256;
  v.merges.reserve(static_cast<size_t>(n_fill));

  std::vector<std::string> seed;
  for (char c : kSeedChars) seed.push_back(byte_to_token_text(static_cast<uint8_t>(c)));
  // Level 1: pairs of seed characters; level 2: pairs of level-1 tokens. Both in diagonal order
  // (by i + j), so every prefix of the list mixes all the leading characters.
  auto add_pairs = [&](const std::vector<std::string>& parts, std::vector<std::string>* made) {
    const int64_t n = static_cast<int64_t>(parts.size());
    for (int64_t s = 0; s <= 2 * (n - 1); ++s) {
      for (int64_t i = std::max<int64_t>(0, s - (n - 1)); i <= std::min(s, n - 1); ++i) {
        if (static_cast<int64_t>(v.merges.size()) >= n_fill) return;
        const std::string& a = parts[static_cast<size_t>(i)];
        const std::string& b = parts[static_cast<size_t>(s - i)];
        v.merges.push_back(a + " " + b);
        v.tokens.push_back(a + b);
        if (made) made->push_back(a + b);
      }
    }
  };
  std::vector<std::string> level1;
  add_pairs(seed, &level1);
  if (static_cast<int64_t>(v.merges.size()) < n_fill) add_pairs(level1, nullptr);

  v.token_types.assign(v.tokens.size(), kTokenNormal);
  v.bos_id = v.pad_id = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<|endoftext|>");
  v.tokens.push_back("<|im_start|>");
  v.eos_id = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<|im_end|>");
  v.token_types.resize(v.tokens.size(), kTokenControl);
  return v;
}

void write_synthetic_vocab(gguf::Writer& w, int32_t n_vocab) {
  const SyntheticVocab v = synthetic_vocab(n_vocab);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_array("tokenizer.ggml.token_type", v.token_types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template", kChatML);
}

void copy_vocab(gguf::Writer& w, const gguf::File& src, int32_t n_vocab) {
  const gguf::Value* tokens_v = src.find("tokenizer.ggml.tokens");
  if (!tokens_v) throw std::invalid_argument(fmt::format("--vocab {}: no tokenizer.ggml.tokens", src.name()));
  const uint64_t n_tok = tokens_v->array_size();
  if (n_tok > static_cast<uint64_t>(n_vocab))
    throw std::invalid_argument(fmt::format("--vocab {}: {} tokens do not fit the model's n_vocab {}", src.name(), n_tok, n_vocab));
  for (const char* k : {"tokenizer.ggml.token_type", "tokenizer.ggml.scores"}) {
    if (const gguf::Value* v = src.find(k); v && v->array_size() != n_tok)
      throw std::invalid_argument(fmt::format("--vocab {}: {} has {} entries for {} tokens", src.name(), k, v->array_size(), n_tok));
  }
  const bool pad = n_tok < static_cast<uint64_t>(n_vocab);
  for (const gguf::Value& v : src.kvs()) {
    const std::string_view key = v.key();
    if (!key.starts_with("tokenizer.")) continue;
    if (pad && key == "tokenizer.ggml.tokens") {
      const auto views = v.as_string_array();
      std::vector<std::string> toks(views.begin(), views.end());
      for (uint64_t i = n_tok; i < static_cast<uint64_t>(n_vocab); ++i) toks.push_back(fmt::format("[PAD{}]", i));
      w.set_string_array(key, toks);
    } else if (pad && key == "tokenizer.ggml.token_type") {
      auto types = v.as_array<int32_t>();
      types.resize(static_cast<size_t>(n_vocab), kTokenUnused);
      w.set_array(key, types);
    } else if (pad && key == "tokenizer.ggml.scores") {
      auto scores = v.as_array<float>();
      scores.resize(static_cast<size_t>(n_vocab), 0.0f);
      w.set_array(key, scores);
    } else {
      w.set(key, v);
    }
  }
}

}  // namespace minfer::quantize
