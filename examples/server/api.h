// The OpenAI / llama-server request and response shapes: a JSON body in, a Job out (every field
// type- and range-checked: anything wrong is a BadRequest naming the field), results in, JSON
// out. No HTTP and no engine here, so every shape can be tested on its own.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

using json = nlohmann::ordered_json;  // ordered: tool schemas reach the template in the client's key order

/// A request that cannot be served as sent: HTTP 400 with the message.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What parsing needs to know about the server.
struct ApiLimits {
  int32_t n_ctx_seq = 0;      ///< a prompt must be shorter (room for one generated token)
  int32_t n_vocab = 0;
  int32_t n_parallel = 1;     ///< the largest n
  int32_t max_outputs = 1;    ///< the most prompts x n one request may ask for
  size_t max_token_bytes = 1; ///< the longest token text: a text longer than n_ctx_seq of them is refused untokenized
  SamplerParams sampling;     ///< defaults for fields a request leaves out
  int32_t n_predict = -1;     ///< default max_tokens; -1: until the context ends
  /// A conversation ending with an assistant message: its text starts the reply (rendered as the
  /// messages before it with the generation prompt, then that text), as llama-server's default;
  /// false renders it as a finished turn.
  bool prefill_assistant = true;
};

/// One generation request, parsed.
struct Job {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  bool return_tokens = false;  ///< llama-server's "tokens" (generated ids) and minfer's "prompt_ids"
  std::vector<std::vector<int32_t>> prompts;  ///< one or more (completions' array prompts)
  int32_t n = 1;
  GenerateParams gen;
  SamplerParams sampling;
  int32_t n_logprobs = -1;  ///< -1: no logprobs; else alternatives per token
  bool cache_prompt = true;
};

/// Renders a chat with the model's template (thread-safe; the server serializes it).
using RenderChat = std::function<jinja::Text(const chat::ChatInputs&)>;

/// /v1/completions (chat = false) or /v1/chat/completions. Throws BadRequest.
Job parse_job(const json& body, bool chat, const tokenizer::Tokenizer& tok, const ApiLimits& lim, const RenderChat& render);

/// What the server bounds in a JSON text before parsing it (strings skipped, nothing parsed): the
/// depth of nested arrays/objects (the parser recurses) and the most members any one object has
/// (an upper bound: commas + 1, counted only for closed objects; nlohmann's ordered_json inserts
/// a key by a linear search, so one object of n keys costs n^2: 80,000 keys took 12 s).
struct JsonShape {
  int depth = 0;
  size_t widest_object = 0;
};
JsonShape json_shape(std::string_view text);

/// "stop" (an end-of-generation token or a stop string) or "length" (max_tokens, the context, the
/// server's --timeout, a full KV pool).
std::string finish_reason(const GenerateResult& r);

/// The log-probability entries a response shows for `r`: every generated token except an
/// end-of-generation token that ended the run (it has no text) and the tokens of a stop string
/// cut from the text (those that begin past it).
std::span<const TokenLogprob> shown_logprobs(const GenerateResult& r, const tokenizer::Tokenizer& tok);
/// How many leading entries of `lps` begin inside the first `text_bytes` bytes of the output text,
/// when the first of them begins at byte *lp_bytes (advanced past the counted ones). A response
/// shows only those: the tokens of a stop string that was cut from the text are not shown (as
/// llama-server drops them), and a stream holds a token back until its text is sent.
size_t logprobs_in_text(std::span<const TokenLogprob> lps, size_t text_bytes, size_t* lp_bytes,
                        const tokenizer::Tokenizer& tok);

/// Completions' text_offset: where each token's text begins in the returned text, counted in
/// characters (Unicode code points: Python's str offsets, as OpenAI counts them), not bytes. A
/// token that begins inside a character (byte-level BPE splits "é" or an emoji across tokens)
/// gets the offset after that character: the characters that begin before its first byte. Bytes
/// that are not UTF-8 count as the U+FFFD each maximal ill-formed part becomes in the text.
/// Kept across the chunks of a stream.
struct TextOffset {
  size_t chars = 0;     ///< characters complete in the text so far
  std::string pending;  ///< the bytes of a character not complete yet (0-3)
  /// The offset of a token with text `piece`, which is then added.
  size_t next(std::string_view piece);
};

struct ResponseMeta {
  std::string id;
  std::string model;
  int64_t created = 0;
};

/// OpenAI's logprobs object of a chat choice ({"content": [...]}) or of a completion choice
/// ({"tokens", "token_logprobs", "top_logprobs", "text_offset"}); text_offset continues from
/// *offset and advances it.
json logprobs_json(std::span<const TokenLogprob> lps, bool chat, const tokenizer::Tokenizer& tok, TextOffset* offset);

/// "usage" over every output: prompt tokens counted once per prompt, cached ones in
/// prompt_tokens_details.cached_tokens.
json usage_json(const Job& job, std::span<const GenerateResult> outputs);
/// llama-server's "timings".
json timings_json(std::span<const GenerateResult> outputs);

/// The whole non-streamed response (outputs[p * n + i] is choice i of prompt p).
json completion_json(const Job& job, std::span<const GenerateResult> outputs, const ResponseMeta& meta,
                     const tokenizer::Tokenizer& tok);

/// One streamed chunk for output `index`: text (chat: delta content; `role` adds the assistant
/// role), logprobs (may be empty), finish_reason (null while generating).
json chunk_json(const Job& job, const ResponseMeta& meta, int32_t index, const std::string& text,
                std::span<const TokenLogprob> lps, const json& finish, bool role, const tokenizer::Tokenizer& tok,
                TextOffset* offset);

/// {"error": {"message", "type", "code"}} as OpenAI and llama-server send it.
json error_json(const std::string& message, int status);

/// JSON text for a response: invalid UTF-8 (a token that is half a character) is replaced, never thrown.
std::string dump(const json& j);

}  // namespace minfer::server
