#include "tokenizer/stream_decoder.h"

#include "tokenizer/unicode.h"

namespace minfer::tokenizer {

std::string StreamDecoder::push(int32_t id) { return push_bytes(tok_->token_to_piece(id, skip_special_)); }

std::string StreamDecoder::push_bytes(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Utf8Scan sc = utf8_scan(pending_, i);
    if (sc.kind == Utf8Scan::incomplete) break;  // wait for the rest of this character
    if (sc.kind == Utf8Scan::valid) {
      out.append(pending_, i, sc.len);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += sc.len;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_replace_invalid(pending_);
  pending_.clear();
  return out;
}

}  // namespace minfer::tokenizer
