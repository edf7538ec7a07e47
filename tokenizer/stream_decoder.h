// Incremental detokenization for streaming generation output.
//
// A byte-level BPE token can end in the middle of a multi-byte UTF-8 character (an emoji is often
// two or three tokens). StreamDecoder returns only complete characters: the bytes of a character
// that is still incomplete at the end of the pushed tokens are held back until a later token
// completes it.
//
// Ill-formed bytes are never passed through: each maximal ill-formed subpart (Unicode §3.9) becomes
// one U+FFFD, exactly like Python's `bytes.decode("utf-8", errors="replace")` (the Qwen tokenizer
// config's `errors: "replace"`). So the concatenation of every push() and the final flush() equals
// utf8_replace_invalid(tokenizer.decode(ids)) — and equals decode(ids) itself whenever that is
// well-formed UTF-8.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {

class StreamDecoder {
 public:
  /// `tok` must outlive the decoder. `skip_special` as in Tokenizer::token_to_piece.
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false)
      : tok_(&tok), skip_special_(skip_special) {}

  /// Adds one token; returns the text that became complete (possibly empty). Throws
  /// std::out_of_range for an id outside the vocabulary (the decoder state is then unchanged).
  std::string push(int32_t id);

  /// Adds raw bytes (for tests and callers that decode pieces themselves).
  std::string push_bytes(std::string_view bytes);

  /// Returns whatever is held back, a truncated character as one U+FFFD, and resets.
  std::string flush();

  /// Drops the held-back bytes (the start of a character generation stopped inside, which has no
  /// text yet) and resets. What generation prints at a stop: never a U+FFFD for a cut character.
  void discard() { pending_.clear(); }

  /// Bytes currently held back (0-3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace minfer::tokenizer
