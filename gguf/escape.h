// Quoting of file-provided strings for messages and dumps (internal to minfer_gguf): keys and
// names come from untrusted files and may hold control bytes or be megabytes long.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace minfer::gguf {

/// `s` between `q` quotes (single quotes in error messages, double in dumps), with \q \\ \n \r \t
/// and \xNN escapes for other bytes below 0x20 and 0x7f; bytes >= 0x80 pass through (UTF-8).
/// Cut after `max_chars` input bytes with "..." appended.
std::string quote(std::string_view s, size_t max_chars = 120, char q = '\'');

}  // namespace minfer::gguf
