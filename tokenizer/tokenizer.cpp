#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "tokenizer/unicode.h"

namespace minfer::tokenizer {
namespace {

bool is_added(TokenType t) { return t == TokenType::control || t == TokenType::user_defined; }

// Token types that take part in BPE: everything that is stored in the byte-level alphabet.
bool is_bpe(TokenType t) {
  return t == TokenType::normal || t == TokenType::undefined || t == TokenType::byte;
}

const std::string kEmpty;

}  // namespace

Tokenizer::Tokenizer(Vocab vocab)
    : vocab_(std::move(vocab)),
      pre_(pre_type(vocab_.pre) == PreType::llama3 ? kLlama3SplitPattern : kQwen2SplitPattern) {
  validate_vocab(vocab_);
  nfc_ = pre_type(vocab_.pre) == PreType::qwen2;
  const size_t n = vocab_.tokens.size();
  if (vocab_.token_types.empty()) vocab_.token_types.assign(n, TokenType::normal);

  if (const int32_t dup = token_to_id_.build(vocab_.tokens); dup >= 0) {
    const std::string& text = vocab_.tokens[dup];
    throw std::invalid_argument("tokenizer: token text '" + text + "' appears twice (ids " +
                                std::to_string(token_to_id_.find(text, vocab_.tokens)) + " and " +
                                std::to_string(dup) + ")");
  }

  // Merges only ever produce byte-level tokens; an added token whose literal text happens to look
  // like a merge result must not be reachable through BPE (HF keeps added tokens out of the model).
  bpe_ = BpeModel(vocab_.merges, [this](std::string_view s) -> int32_t {
    const int32_t id = token_to_id_.find(s, vocab_.tokens);
    return id >= 0 && is_bpe(vocab_.token_types[id]) ? id : -1;
  });

  pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = vocab_.token_types[i];
    const std::string& text = vocab_.tokens[i];
    if (is_bpe(t)) {
      pieces_[i] = byte_level_decode(text);
    } else if (t == TokenType::unused) {
      // Padding rows of the embedding matrix; they have no text in the original tokenizer.
    } else {
      pieces_[i] = text;  // control, unknown, user-defined: literal text
    }
    if (is_added(t)) special_by_byte_[static_cast<uint8_t>(text[0])].push_back(static_cast<int32_t>(i));
  }
  for (auto& v : special_by_byte_) {
    std::stable_sort(v.begin(), v.end(), [this](int32_t a, int32_t b) {
      return vocab_.tokens[a].size() > vocab_.tokens[b].size();
    });
  }

  // End of turn / end of generation as llama.cpp decides them (llama-vocab.cpp): the file's
  // ids first, then tokens recognised by their text.
  static const char* const kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                          "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>"};
  static const char* const kEogTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                          "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                                          "<|end_of_text|>", "<end_of_utterance>"};
  eot_id_ = vocab_.eot_id;
  for (const char* t : kEotTexts) {
    if (eot_id_ >= 0) break;
    if (const auto id = find_token(t)) eot_id_ = *id;
  }
  if (eot_id_ < 0) eot_id_ = vocab_.eos_id;
  auto add_eog = [this](int32_t id) {
    if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end()) eog_ids_.push_back(id);
  };
  for (const char* t : kEogTexts)
    if (const auto id = find_token(t)) add_eog(*id);
  add_eog(vocab_.eos_id);
  add_eog(eot_id_);
  add_eog(vocab_.eom_id);
  if (const auto eom = find_token("<|eom_id|>")) add_eog(*eom);
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= n_vocab()) {
    throw std::out_of_range("tokenizer: token id " + std::to_string(id) + " is out of range [0, " +
                            std::to_string(n_vocab()) + ")");
  }
}

int32_t Tokenizer::match_special(std::string_view text, size_t pos, std::span<const uint8_t> untrusted) const {
  const auto& cands = special_by_byte_[static_cast<uint8_t>(text[pos])];
  const std::string_view rest = text.substr(pos);
  for (int32_t id : cands) {  // longest first
    const std::string& t = vocab_.tokens[id];
    if (!rest.starts_with(t)) continue;
    if (!untrusted.empty() &&
        std::any_of(untrusted.begin() + static_cast<std::ptrdiff_t>(pos),
                    untrusted.begin() + static_cast<std::ptrdiff_t>(pos + t.size()), [](uint8_t u) { return u != 0; }))
      continue;  // a special token's text inside data is plain text
    return id;
  }
  return -1;
}

void Tokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // Every entry (encode, encode_trusted) reaches plain text here: ill-formed UTF-8 reads as U+FFFD
  // per maximal subpart. Special tokens are valid UTF-8, so matching them first on the raw bytes
  // finds what it would find on the replaced text.
  std::string replaced;
  if (utf8_first_invalid(text) != std::string_view::npos) {
    replaced = utf8_replace_invalid(text);
    text = replaced;
  }
  if (!nfc_) {
    // Llama 3 (HF "ignore_merges": true, llama.cpp's LLAMA3 pre-type): a word that is itself a
    // token is emitted whole; merges could otherwise reach a different split.
    for (std::string_view word : pre_.split(text)) {
      const int32_t id = token_to_id_.find(byte_level_encode(word), vocab_.tokens);
      if (id >= 0 && is_bpe(vocab_.token_types[id])) out.push_back(id);
      else bpe_.encode_word(word, out);
    }
    return;
  }
  const std::string norm = nfc_normalize(text);
  for (std::string_view word : pre_.split(norm)) bpe_.encode_word(word, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special, bool add_bos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_bos) {
    if (vocab_.bos_id < 0) throw std::logic_error("tokenizer: add_bos requested but the vocabulary has no bos token");
    out.push_back(vocab_.bos_id);
  }
  if (!parse_special) {
    encode_text(text, out);
    return out;
  }
  const std::vector<int32_t> rest = encode_specials(text, {});
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<int32_t> Tokenizer::encode_specials(std::string_view text, std::span<const uint8_t> untrusted) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  size_t start = 0;  // start of the pending plain-text fragment
  for (size_t pos = 0; pos < text.size();) {
    const int32_t id =
        special_by_byte_[static_cast<uint8_t>(text[pos])].empty() ? -1 : match_special(text, pos, untrusted);
    if (id < 0) {
      ++pos;
      continue;
    }
    encode_text(text.substr(start, pos - start), out);
    out.push_back(id);
    pos += vocab_.tokens[id].size();
    start = pos;
  }
  encode_text(text.substr(start), out);
  return out;
}

std::vector<int32_t> Tokenizer::encode_trusted(std::string_view text, std::span<const uint8_t> untrusted) const {
  if (!untrusted.empty() && untrusted.size() != text.size()) {
    throw std::invalid_argument("tokenizer: encode_trusted mask has " + std::to_string(untrusted.size()) +
                                " entries for " + std::to_string(text.size()) + " bytes");
  }
  return encode_specials(text, untrusted);
}

std::vector<int32_t> Tokenizer::with_bos(std::vector<int32_t> ids) const {
  if (vocab_.add_bos && (ids.empty() || ids.front() != vocab_.bos_id)) {  // add_bos implies a bos id (validate_vocab)
    ids.insert(ids.begin(), vocab_.bos_id);
  }
  return ids;
}

const std::string& Tokenizer::token_to_piece(int32_t id, bool skip_special) const {
  check_id(id);
  if (skip_special) {
    const TokenType t = vocab_.token_types[id];
    if (t == TokenType::control || t == TokenType::unknown) return kEmpty;
  }
  return pieces_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) out.append(token_to_piece(id, skip_special));
  return out;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.tokens[id];
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return vocab_.token_types[id];
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = token_to_id_.find(text, vocab_.tokens);
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace minfer::tokenizer
