#include "runtime/token_sink.h"

#include <algorithm>

namespace minfer {

TokenSink::TokenSink(const tokenizer::Tokenizer& tok, Sampler& sampler, const GenerateParams& params,
                     GenerateResult& result, const std::function<void(std::string_view)>& on_text)
    : tok_(tok), sampler_(sampler), params_(params), r_(result), on_text_(on_text), dec_(tok, /*skip_special=*/true) {}

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
  // The earliest stop string in the text ends the run (a token may complete two at once).
  size_t first = std::string::npos;
  for (const auto& s : params_.stop)
    if (!s.empty()) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    emit(pending_.substr(0, first));
    pending_.clear();
    r_.stop_reason = "stop";
    return false;
  }
  // Stream all but the longest tail that is a proper prefix of some stop string (it may still
  // become one), never splitting a UTF-8 sequence.
  size_t keep = 0;
  for (const auto& s : params_.stop) {
    if (s.empty()) continue;
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > keep; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  }
  size_t cut = pending_.size() - keep;
  while (cut > 0 && cut < pending_.size() && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
  emit(pending_.substr(0, cut));
  pending_.erase(0, cut);
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
