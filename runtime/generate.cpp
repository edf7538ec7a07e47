#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "tokenizer/stream_decoder.h"

namespace minfer {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Streams text while holding back any tail that could still grow into a stop string.
class StopFilter {
 public:
  StopFilter(const std::vector<std::string>& stop, const std::function<void(std::string_view)>& sink)
      : stop_(stop), sink_(sink) {
    for (const auto& s : stop_) hold_ = std::max(hold_, s.size());
  }
  // Returns true when a stop string was found (text is cut before it).
  bool push(const std::string& piece, std::string& text) {
    pending_ += piece;
    for (const auto& s : stop_) {
      if (s.empty()) continue;
      if (auto at = pending_.find(s); at != std::string::npos) {
        emit(pending_.substr(0, at), text);
        pending_.clear();
        return true;
      }
    }
    if (pending_.size() > hold_) {
      // Keep the last hold_ - 1 bytes, but never split a UTF-8 sequence.
      size_t cut = pending_.size() - (hold_ > 0 ? hold_ - 1 : 0);
      while (cut > 0 && cut < pending_.size() && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
      emit(pending_.substr(0, cut), text);
      pending_.erase(0, cut);
    }
    return false;
  }
  void finish(std::string& text) {
    emit(pending_, text);
    pending_.clear();
  }

 private:
  void emit(const std::string& s, std::string& text) {
    if (s.empty()) return;
    text += s;
    if (sink_) sink_(s);
  }
  const std::vector<std::string>& stop_;
  const std::function<void(std::string_view)>& sink_;
  std::string pending_;
  size_t hold_ = 0;
};

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

  tokenizer::StreamDecoder dec(tok, /*skip_special=*/true);
  StopFilter filter(params.stop, on_text);
  const int32_t limit = params.n_predict < 0 ? INT32_MAX : params.n_predict;
  auto t1 = Clock::now();
  r.stop_reason = "length";
  for (int32_t i = 0; i < limit; ++i) {
    const int32_t id = sampler.sample(logits);
    sampler.accept(id);
    r.ids.push_back(id);
    if (params.stop_at_eog && tok.is_eog(id)) {
      r.stop_reason = "eog";
      break;
    }
    if (filter.push(dec.push(id), r.text)) {
      r.stop_reason = "stop";
      break;
    }
    if (i + 1 == limit) break;
    if (session.n_past() >= session.n_ctx()) {
      r.stop_reason = "context";
      break;
    }
    const int32_t one[1] = {id};
    auto l = session.eval(one);
    logits.assign(l.begin(), l.end());
  }
  if (r.stop_reason != "stop") {
    filter.push(dec.flush(), r.text);
    filter.finish(r.text);
  }
  r.decode_ms = ms_since(t1);
  return r;
}

}  // namespace minfer
