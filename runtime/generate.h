// The generation loop: prompt -> prefill -> sample/decode until a stop condition, streaming text.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

struct GenerateParams {
  int32_t n_predict = 128;         ///< max new tokens; 0: prefill only; < 0: until a stop condition or the context is full
  std::vector<std::string> stop;   ///< stop strings (not included in the text)
  bool stop_at_eog = true;         ///< stop at end-of-generation tokens (EOS, <|im_end|>, ...)
  const std::atomic<bool>* cancel = nullptr;  ///< when set and true, stop after the current token ("cancelled")
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> ids;  ///< generated tokens (the stop token included when it ended the run)
  std::string text;          ///< generated text, cut before a stop string; special tokens skipped
  int32_t n_prompt_eval = 0; ///< prompt tokens evaluated (not reused from the cache)
  int32_t n_prompt_cached = 0;  ///< prompt tokens taken from the scheduler's prefix cache
  double prefill_ms = 0, decode_ms = 0;
  /// "length" (n_predict reached), "eog", "stop" (a stop string), "context" (context full),
  /// "cancelled" (GenerateParams::cancel); from the Scheduler also "timeout" (Request::deadline),
  /// "kv_full" (the pool ran out with nothing left to preempt) and "error".
  std::string stop_reason;
  /// One entry per generated token when asked for (Request::n_logprobs), in the order of `ids`.
  std::vector<TokenLogprob> logprobs;

  double prefill_tok_s() const { return prefill_ms > 0 ? n_prompt_eval * 1000.0 / prefill_ms : 0; }
  /// Decode speed over the tokens produced by one-token forward passes.
  double decode_tok_s() const;
};

/// Evaluates `prompt` after what the session already holds (its tokens must be the prefix the
/// session was fed; multi-turn chat appends turns), then samples up to n_predict tokens.
/// `on_text` receives each complete UTF-8 piece of text as it is generated (stop strings held back
/// until they can be ruled out). Throws ContextFullError when the prompt alone does not fit.
GenerateResult generate(Session& session, const tokenizer::Tokenizer& tok, Sampler& sampler, std::span<const int32_t> prompt,
                        const GenerateParams& params, const std::function<void(std::string_view)>& on_text = nullptr);

}  // namespace minfer
