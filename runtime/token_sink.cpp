#include "runtime/token_sink.h"

#include <algorithm>

namespace minfer {

TokenSink::TokenSink(const tokenizer::Tokenizer& tok, Sampler& sampler, const GenerateParams& params,
                     GenerateResult& result, const std::function<void(std::string_view)>& on_text)
    : tok_(tok), sampler_(sampler), params_(params), r_(result), on_text_(on_text), dec_(tok, /*skip_special=*/true) {
  for (const auto& s : params_.stop) hold_ = std::max(hold_, s.size());
}

void TokenSink::emit(const std::string& s) {
  if (s.empty()) return;
  r_.text += s;
  if (on_text_) on_text_(s);
}

bool TokenSink::push(int32_t id) {
  sampler_.accept(id);
  r_.ids.push_back(id);
  if (params_.stop_at_eog && tok_.is_eog(id)) {
    r_.stop_reason = "eog";
    return false;
  }
  pending_ += dec_.push(id);
  for (const auto& s : params_.stop) {
    if (s.empty()) continue;
    if (auto at = pending_.find(s); at != std::string::npos) {
      emit(pending_.substr(0, at));
      pending_.clear();
      r_.stop_reason = "stop";
      return false;
    }
  }
  if (pending_.size() >= hold_) {
    // Stream all but the last hold_ - 1 bytes (they may start a stop string), never splitting a
    // UTF-8 sequence.
    size_t cut = pending_.size() - (hold_ > 0 ? hold_ - 1 : 0);
    while (cut > 0 && cut < pending_.size() && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
    emit(pending_.substr(0, cut));
    pending_.erase(0, cut);
  }
  if (params_.cancel && params_.cancel->load()) {
    r_.stop_reason = "cancelled";
    return false;
  }
  const int32_t limit = params_.n_predict < 0 ? INT32_MAX : params_.n_predict;
  if (static_cast<int32_t>(r_.ids.size()) >= limit) {
    r_.stop_reason = "length";
    return false;
  }
  return true;
}

void TokenSink::finish() {
  dec_.discard();  // a character cut by the stop has no text: never a U+FFFD
  if (r_.stop_reason != "stop") emit(pending_);
  pending_.clear();
}

}  // namespace minfer
