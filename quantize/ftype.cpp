#include "quantize/ftype.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace minfer::quantize {
namespace {

struct FileTypeInfo {
  FileType type;
  std::string_view name;
  DType default_dtype;
};

constexpr FileTypeInfo kFileTypes[] = {
    {FileType::ALL_F32, "F32", DType::F32},
    {FileType::MOSTLY_F16, "F16", DType::F16},
    {FileType::MOSTLY_Q4_0, "Q4_0", DType::Q4_0},
    {FileType::MOSTLY_Q4_1, "Q4_1", DType::Q4_1},
    {FileType::MOSTLY_Q8_0, "Q8_0", DType::Q8_0},
    {FileType::MOSTLY_Q5_0, "Q5_0", DType::Q5_0},
    {FileType::MOSTLY_Q5_1, "Q5_1", DType::Q5_1},
    {FileType::MOSTLY_Q2_K, "Q2_K", DType::Q2_K},
    {FileType::MOSTLY_Q3_K_S, "Q3_K_S", DType::Q3_K},
    {FileType::MOSTLY_Q3_K_M, "Q3_K_M", DType::Q3_K},
    {FileType::MOSTLY_Q3_K_L, "Q3_K_L", DType::Q3_K},
    {FileType::MOSTLY_Q4_K_S, "Q4_K_S", DType::Q4_K},
    {FileType::MOSTLY_Q4_K_M, "Q4_K_M", DType::Q4_K},
    {FileType::MOSTLY_Q5_K_S, "Q5_K_S", DType::Q5_K},
    {FileType::MOSTLY_Q5_K_M, "Q5_K_M", DType::Q5_K},
    {FileType::MOSTLY_Q6_K, "Q6_K", DType::Q6_K},
    {FileType::MOSTLY_BF16, "BF16", DType::BF16},
};

// llama-quantize's aliases (tools/quantize/quantize.cpp QUANT_OPTIONS).
struct Alias {
  std::string_view name;
  FileType type;
};
constexpr Alias kAliases[] = {
    {"Q3_K", FileType::MOSTLY_Q3_K_M},
    {"Q4_K", FileType::MOSTLY_Q4_K_M},
    {"Q5_K", FileType::MOSTLY_Q5_K_M},
};

// Plain dtypes and the file type recorded for a file made of them.
struct Plain {
  DType dtype;
  FileType type;
};
constexpr Plain kPlain[] = {
    {DType::F32, FileType::ALL_F32},       {DType::F16, FileType::MOSTLY_F16},
    {DType::BF16, FileType::MOSTLY_BF16},  {DType::Q4_0, FileType::MOSTLY_Q4_0},
    {DType::Q4_1, FileType::MOSTLY_Q4_1},  {DType::Q5_0, FileType::MOSTLY_Q5_0},
    {DType::Q5_1, FileType::MOSTLY_Q5_1},  {DType::Q8_0, FileType::MOSTLY_Q8_0},
    {DType::Q2_K, FileType::MOSTLY_Q2_K},  {DType::Q3_K, FileType::MOSTLY_Q3_K_S},
    {DType::Q4_K, FileType::MOSTLY_Q4_K_S}, {DType::Q5_K, FileType::MOSTLY_Q5_K_S},
    {DType::Q6_K, FileType::MOSTLY_Q6_K},
};

// llama.cpp mixes minfer cannot make, with the reason.
constexpr std::string_view kUnavailable[] = {
    "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S",
    "IQ3_M", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4_MOE", "Q2_K_S"};

const FileTypeInfo& info(FileType t) {
  for (const auto& i : kFileTypes)
    if (i.type == t) return i;
  throw std::invalid_argument(fmt::format("unknown llama file type id {}", static_cast<uint32_t>(t)));
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

}  // namespace

std::string_view file_type_name(FileType t) { return info(t).name; }

DType file_type_default_dtype(FileType t) { return info(t).default_dtype; }

const std::vector<FileType>& all_file_types() {
  static const std::vector<FileType> all = [] {
    std::vector<FileType> v;
    for (const auto& i : kFileTypes) v.push_back(i.type);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return all;
}

std::string target_help() {
  std::string mixes, plain;
  for (const auto& i : kFileTypes) {
    if (!mixes.empty()) mixes += ' ';
    mixes += i.name;
  }
  for (const auto& a : kAliases) mixes += fmt::format(" {}(={})", a.name, file_type_name(a.type));
  for (const auto& p : kPlain) {
    if (!plain.empty()) plain += ' ';
    plain += dtype_name(p.dtype);
  }
  return fmt::format("mixes (llama.cpp file types): {}; plain dtypes (one dtype for every "
                     "quantizable tensor): {}",
                     mixes, plain);
}

QuantTarget parse_target(std::string_view s) {
  for (const auto& i : kFileTypes)
    if (s == i.name) return {i.type, false, std::string(i.name)};
  // llama-quantize also takes a file type by its number (15 = Q4_K_M).
  int id = -1;
  const char* const last = s.data() + s.size();
  if (const auto [end, ec] = std::from_chars(s.data(), last, id); ec == std::errc() && end == last)
    for (const auto& i : kFileTypes)
      if (static_cast<int>(i.type) == id) return {i.type, false, std::string(i.name)};
  for (const auto& a : kAliases)
    if (s == a.name) return {a.type, false, std::string(file_type_name(a.type))};
  if (auto d = dtype_from_name(s)) {
    for (const auto& p : kPlain)
      if (p.dtype == *d) return {p.type, true, std::string(dtype_name(p.dtype))};
  }
  const std::string u = upper(s);
  for (const auto& i : kFileTypes)
    if (u == i.name) return {i.type, false, std::string(i.name)};
  for (const auto& a : kAliases)
    if (u == a.name) return {a.type, false, std::string(file_type_name(a.type))};
  for (std::string_view n : kUnavailable) {
    if (u == n) {
      throw std::invalid_argument(fmt::format(
          "--type {}: not available in minfer ({}); accepted: {}", s,
          n == "Q2_K_S" ? "it needs an importance matrix"
                        : "IQ/ternary/MXFP4 types have no minfer kernels and most need an importance matrix",
          target_help()));
    }
  }
  throw std::invalid_argument(fmt::format("--type '{}': unknown type; accepted: {}", s, target_help()));
}

}  // namespace minfer::quantize
