// Byte-level BPE tokenizer (GGUF `tokenizer.ggml.model = "gpt2"`) with the Qwen2 or the Llama 3
// pre-tokenizer (`tokenizer.ggml.pre = "qwen2"` or `"llama-bpe"`), matching Hugging Face
// `tokenizers` on Qwen2/Qwen3 and Llama 3 vocabularies.
//
// encode(text):
//   1. Special tokens (parse_special only): the text is scanned left to right and at each position
//      the longest control or user-defined token text that starts there is emitted as its id; the
//      text between them goes through steps 2-4. With parse_special off, "<|im_end|>" is plain
//      text (it is then split into '<', '|', 'im', '_end', '|', '>'-like pieces by BPE).
//      (llama.cpp and HF always split user-defined tokens such as <think>; here both kinds follow
//      the flag, so untrusted text can never inject any added token.)
//   2. Qwen2 only: NFC normalization (utf8proc) — the Qwen2 normalizer. Input that is not NFC
//      therefore does not round-trip byte for byte: decode(encode(s)) == NFC(s). Llama 3 has no
//      normalizer.
//   3. Pre-tokenization with the vocabulary's regex (tokenizer/pretokenizer.h).
//   4. Byte-level BPE of each piece (tokenizer/bpe.h); Llama 3 first takes a piece that is a token
//      of its own whole (HF "ignore_merges").
//   Text that is not well-formed UTF-8 is rejected with std::invalid_argument.
//
// decode(ids): concatenation of token_to_piece(id). The result is raw bytes and may end inside a
// multi-byte character (use StreamDecoder for incremental output, utf8_replace_invalid() to clean).
//
// Thread safety: all const member functions may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/flat_index.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace minfer::gguf {
class File;
}

namespace minfer::tokenizer {

class Tokenizer {
 public:
  /// Reads the vocabulary from GGUF metadata (see vocab_from_gguf in tokenizer/vocab_gguf.h).
  static Tokenizer from_gguf(const gguf::File& file);

  /// Builds the indices. Throws std::invalid_argument for a malformed vocabulary: unsupported
  /// model / pre-tokenizer, empty or duplicate token text, token_types length mismatch, a merge that
  /// references an unknown token, a special id out of range.
  explicit Tokenizer(Vocab vocab);

  /// Token ids of `text` (UTF-8). `parse_special`: match control and user-defined token texts (see
  /// the file comment). `add_bos`: prepend bos_id() (std::logic_error when the vocabulary has none).
  /// Ill-formed UTF-8 is read as U+FFFD per maximal subpart (utf8_replace_invalid, Python's
  /// errors="replace"), as llama.cpp's tokenizer replaces it: one stray byte in a corpus or a
  /// prompt file does not stop a run.
  std::vector<int32_t> encode(std::string_view text, bool parse_special, bool add_bos = false) const;

  /// encode(text, parse_special = true) where a special token is matched only if none of its
  /// bytes is marked in `untrusted` (one entry per byte of `text`, or empty = all trusted); the
  /// bytes of an unmatched token are plain text. A rendered chat is tokenized this way so that
  /// message content can never become a special token (chat/tokenize_chat.h). Ill-formed UTF-8
  /// reads as U+FFFD, as in encode(). Throws std::invalid_argument for a mask of the wrong length.
  std::vector<int32_t> encode_trusted(std::string_view text, std::span<const uint8_t> untrusted) const;

  /// A prompt's ids as llama.cpp and Hugging Face build them: BOS is prepended when the file
  /// says so (add_bos_default()), unless `ids` already starts with it (a prompt or a chat
  /// template that writes bos_token itself), so a prompt never gets two.
  std::vector<int32_t> with_bos(std::vector<int32_t> ids) const;

  /// Bytes of the tokens, concatenated; `skip_special` drops control and unknown tokens.
  /// Throws std::out_of_range naming the first id outside [0, n_vocab()).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  /// Bytes of one token: normal tokens are byte-level decoded; control, unknown and user-defined
  /// tokens are their literal text (control/unknown: empty when `skip_special`); unused tokens are
  /// empty. Throws std::out_of_range naming the id.
  const std::string& token_to_piece(int32_t id, bool skip_special = false) const;

  /// The stored token text (byte-level alphabet for normal tokens). Throws std::out_of_range.
  const std::string& token_text(int32_t id) const;

  int32_t n_vocab() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }  ///< -1 when none
  int32_t eos_id() const { return vocab_.eos_id; }  ///< -1 when none
  int32_t pad_id() const { return vocab_.pad_id; }  ///< -1 when none
  /// End of turn: tokenizer.ggml.eot_token_id when the file has it, else the first of
  /// "<|im_end|>", "<|eot_id|>", "<end_of_turn>", ... the vocabulary has, else eos_id().
  int32_t eot_id() const { return eot_id_; }
  /// The file's add_bos_token flag (false for Qwen).
  bool add_bos_default() const { return vocab_.add_bos; }

  /// End of generation, llama.cpp's rule: eos_id(), the file's eot/eom ids, and every token whose
  /// text is one of llama.cpp's end-of-generation texts ("<|im_end|>", "<|endoftext|>",
  /// "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<end_of_turn>", "<|end|>", "<|return|>",
  /// "<|call|>", "<EOT>", ...). Out-of-range ids are false.
  bool is_eog(int32_t id) const;
  /// The ids is_eog() accepts, without duplicates, in no particular order.
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  /// Type of a token. Throws std::out_of_range naming the id.
  TokenType token_type(int32_t id) const;

  /// The id whose stored text is exactly `text` (any token type), if any.
  std::optional<int32_t> find_token(std::string_view text) const;

  const Vocab& vocab() const { return vocab_; }
  size_t n_merges() const { return bpe_.n_merges(); }

 private:
  void check_id(int32_t id) const;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  /// Longest special token starting at text[pos] none of whose bytes is in `untrusted`, or -1.
  int32_t match_special(std::string_view text, size_t pos, std::span<const uint8_t> untrusted = {}) const;
  std::vector<int32_t> encode_specials(std::string_view text, std::span<const uint8_t> untrusted) const;

  Vocab vocab_;
  TextIndex token_to_id_;
  BpeModel bpe_;
  PreTokenizer pre_;
  std::vector<std::string> pieces_;       ///< token_to_piece(id, false)
  std::vector<int32_t> special_by_byte_[256];  ///< special ids by first byte, longest first
  std::vector<int32_t> eog_ids_;
  int32_t eot_id_ = -1;
  bool nfc_ = true;  ///< Qwen2: NFC normalizer; false = Llama 3: no normalizer, ignore_merges
};

}  // namespace minfer::tokenizer
