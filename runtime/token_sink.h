// TokenSink: commits generated tokens one by one — sampler history, the result's ids, streamed
// text — and says when generation must stop (end-of-generation token, stop string, n_predict).
// Shared by generate() and the speculative decoder (and, per sequence, by a batch scheduler) so
// every path stops and streams identically:
//   - text goes out in whole UTF-8 characters: the bytes of a character still incomplete are
//     held back, and dropped when generation stops inside it (any stop: n_predict, end of
//     generation, a stop string, a full context), so no output ever ends in U+FFFD;
//   - stop strings match the decoded text across token boundaries; text that could still be the
//     start of one is held back, and the stop string itself is never emitted;
//   - special tokens (e.g. the end-of-turn token) add no text.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "runtime/generate.h"
#include "tokenizer/stream_decoder.h"

namespace minfer {

class TokenSink {
 public:
  TokenSink(const tokenizer::Tokenizer& tok, Sampler& sampler, const GenerateParams& params, GenerateResult& result,
            const std::function<void(std::string_view)>& on_text);

  /// Commits `id`. Returns false when generation must stop; result.stop_reason says why.
  bool push(int32_t id);

  /// Emits the held-back text that is complete (unless a stop string ended the run) and drops
  /// an incomplete trailing character. Call once, whatever stopped generation.
  void finish();

 private:
  void emit(const std::string& s);

  const tokenizer::Tokenizer& tok_;
  Sampler& sampler_;
  const GenerateParams& params_;
  GenerateResult& r_;
  const std::function<void(std::string_view)>& on_text_;
  tokenizer::StreamDecoder dec_;
  std::string pending_;  // decoded text not yet streamed: may be the start of a stop string
};

}  // namespace minfer
