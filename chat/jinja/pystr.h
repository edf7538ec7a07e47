// Python str semantics on tainted UTF-8 Text: code-point indexing, whitespace (str.isspace's
// set), strip/split/replace/case mapping. Each output byte keeps the taint of the input bytes it
// came from; text the caller supplies (a replacement, a separator) keeps its own mask.
#pragma once

#include <optional>
#include <vector>

#include "chat/jinja/value.h"

namespace minfer::jinja::pystr {

/// The characters (code points) of `t`, one Text each. Ill-formed bytes count as one character.
/// TemplateError past kMaxListItems characters (so are the case maps; replace() past
/// kMaxStringBytes of output).
std::vector<Text> chars(const Text& t);
/// Number of code points.
size_t length(const Text& t);
/// Python's t[k]: code point k (counted from the end when k < 0) as a Text; nullopt when out of
/// range. Walks only to code point k when k >= 0.
std::optional<Text> char_at(const Text& t, int64_t k);
/// Code points [a, b) of `t` (a <= b <= length(t)).
Text span(const Text& t, size_t a, size_t b);

/// str.strip / lstrip / rstrip: `chars` absent strips Unicode whitespace.
Text strip(const Text& t, const std::optional<std::string>& chars, bool left, bool right);
/// str.split(sep, maxsplit) (sep absent: runs of whitespace, no empty pieces); rsplit when
/// `from_right`.
std::vector<Text> split(const Text& t, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right = false);
/// str.splitlines(keepends).
std::vector<Text> splitlines(const Text& t, bool keepends = false);
/// str.replace(old, new, count); count < 0: all.
Text replace(const Text& t, const std::string& old, const Text& repl, int64_t count);
/// str.upper / lower / title / capitalize: the simple case mapping per code point, but for the
/// full mappings of SpecialCasing that Latin text meets (ß, the ligatures, İ) and lower's
/// Final_Sigma.
Text upper(const Text& t);
Text lower(const Text& t);
Text title(const Text& t);
Text capitalize(const Text& t);
/// str.find / rfind in code points; -1 when absent.
int64_t find(const Text& t, const std::string& sub, bool from_right);
/// str.count(sub).
int64_t count(const Text& t, const std::string& sub);
/// True when every character is whitespace (and there is at least one).
bool isspace(const Text& t);
/// The number of runs of word characters (Python's regex \w: letters, digits and numerals, '_';
/// not combining marks): Jinja2's wordcount.
int64_t word_runs(const Text& t);
/// str.isalpha / isdigit / isalnum (at least one character, each a letter (L*) / a digit (Nd,
/// and the No digits Python counts: superscripts, subscripts, circled and parenthesized ones) /
/// a letter or any number (L*, N*)).
bool isalpha(const Text& t);
bool isdigit(const Text& t);
bool isalnum(const Text& t);
/// str.islower / isupper: at least one cased character and none uppercase or titlecase
/// (islower) / lowercase or titlecase (isupper), by general category.
bool islower(const Text& t);
bool isupper(const Text& t);

}  // namespace minfer::jinja::pystr
