#include "runtime/generate.h"

#include "runtime/scheduler.h"

namespace minfer {

double GenerateResult::decode_tok_s() const {
  const size_t n = ids.size() > 1 ? ids.size() - 1 : 0;  // the first token comes from the prefill
  return decode_ms > 0 && n > 0 ? static_cast<double>(n) * 1000.0 / decode_ms : 0;
}

GenerateResult generate(Session& session, const tokenizer::Tokenizer& tok, Sampler& sampler, std::span<const int32_t> prompt,
                        const GenerateParams& params, const std::function<void(std::string_view)>& on_text) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  Scheduler sched(session.runner(), tok);
  Request r;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.params = params;
  r.sampler = &sampler;
  r.seq = session.seq();
  if (on_text) r.on_text = [&on_text](int32_t, std::string_view s) { on_text(s); };
  const RequestId id = sched.submit(std::move(r));
  sched.run();
  RequestResult res = sched.take(id);
  if (!res.error.empty()) throw KvPoolFullError(res.error);
  return std::move(res.choices[0]);
}

}  // namespace minfer
