// TokenSink: commits generated tokens one by one — sampler history, the result's ids, streamed
// text (whole UTF-8 characters, stop strings held back until they are ruled out) — and says when
// generation must stop (end-of-generation token, stop string, n_predict). Shared by generate()
// and the speculative decoder so both stop and stream identically.
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

  /// Flushes held-back text (unless a stop string ended the run).
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
  size_t hold_ = 0;      // longest stop string
};

}  // namespace minfer
