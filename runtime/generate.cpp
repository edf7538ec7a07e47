#include "runtime/generate.h"

#include <chrono>

#include "runtime/token_sink.h"

namespace minfer {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

double GenerateResult::decode_tok_s() const {
  const size_t n = ids.size() > 1 ? ids.size() - 1 : 0;  // the first token comes from the prefill
  return decode_ms > 0 && n > 0 ? static_cast<double>(n) * 1000.0 / decode_ms : 0;
}

GenerateResult generate(Session& session, const tokenizer::Tokenizer& tok, Sampler& sampler, std::span<const int32_t> prompt,
                        const GenerateParams& params, const std::function<void(std::string_view)>& on_text) {
  GenerateResult r;
  r.prompt_ids.assign(prompt.begin(), prompt.end());
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  for (int32_t t : prompt) sampler.accept(t);

  auto t0 = Clock::now();
  std::vector<float> logits;
  {
    auto l = session.eval(prompt);
    logits.assign(l.begin(), l.end());
  }
  r.n_prompt_eval = static_cast<int32_t>(prompt.size());
  r.prefill_ms = ms_since(t0);

  TokenSink sink(tok, sampler, params, r, on_text);
  auto t1 = Clock::now();
  if (params.n_predict == 0) r.stop_reason = "length";  // prefill only, as llama.cpp's -n 0
  while (params.n_predict != 0) {
    const int32_t id = sampler.sample(logits);
    if (!sink.push(id)) break;
    if (session.n_past() >= session.n_ctx()) {
      r.stop_reason = "context";
      break;
    }
    const int32_t one[1] = {id};
    auto l = session.eval(one);
    logits.assign(l.begin(), l.end());
  }
  sink.finish();
  r.decode_ms = ms_since(t1);
  return r;
}

}  // namespace minfer
