#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tokenizer/unicode.h"

namespace minfer::tokenizer {

const std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct PreTokenizer::Code {
  pcre2_code* re = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(re); }
};

PreTokenizer::PreTokenizer(std::string_view pattern) {
  auto code = std::make_shared<Code>();
  int err = 0;
  PCRE2_SIZE err_off = 0;
  code->re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                           PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (code->re == nullptr) {
    throw std::runtime_error("tokenizer: pre-tokenizer regex does not compile at offset " +
                             std::to_string(err_off) + ": " + pcre2_message(err));
  }
  // JIT is an optimisation only; without it the interpreter gives the same matches.
  code->jit = pcre2_jit_compile(code->re, PCRE2_JIT_COMPLETE) == 0;
  code_ = std::move(code);
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> out;
  if (text.empty()) return out;
  // PCRE2 in UTF mode would reject ill-formed input anyway; checking first gives a better message
  // and lets the matcher skip its own check (PCRE2_NO_UTF_CHECK).
  if (const size_t bad = utf8_first_invalid(text); bad != std::string_view::npos) {
    throw std::invalid_argument("tokenizer: input text is not valid UTF-8 (byte offset " +
                                std::to_string(bad) + ")");
  }
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code_->re, nullptr), &pcre2_match_data_free);
  if (!md) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  size_t last = 0;  // end of the previous piece
  while (pos < text.size()) {
    int rc = PCRE2_ERROR_JIT_STACKLIMIT;
    if (code_->jit) {
      rc = pcre2_jit_match(code_->re, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.get(),
                           nullptr);
    }
    // Without JIT, or when its fixed stack runs out, the interpreter (heap frames) takes over.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_->re, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw std::runtime_error("tokenizer: pre-tokenizer regex failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0], e = ov[1];
    if (b > last) out.push_back(text.substr(last, b - last));  // "Isolated": gaps are words too
    if (e > b) {
      out.push_back(text.substr(b, e - b));
      pos = e;
    } else {
      // An empty match cannot happen with this pattern; step one character to stay safe.
      pos = b + utf8_scan(text, b).len;
    }
    last = std::max(last, e);
  }
  if (last < text.size()) out.push_back(text.substr(last));
  return out;
}

std::vector<std::string> pretokenize_qwen2(std::string_view text) {
  static const PreTokenizer pre;
  const std::string norm = nfc_normalize(text);
  std::vector<std::string> out;
  for (std::string_view w : pre.split(norm)) out.emplace_back(w);
  return out;
}

}  // namespace minfer::tokenizer
