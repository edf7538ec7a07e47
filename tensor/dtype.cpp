#include "tensor/dtype.h"

#include <array>
#include <cctype>
#include <limits>
#include <stdexcept>
#include <string>

namespace minfer {
namespace {

// Block byte sizes follow from the GGUF block structs (see tensor/quants.h):
// Q4_0 = f16 d + 16 B nibbles; Q4_1 adds f16 m; Q5_x adds 4 B of high bits; Q8_0 = f16 d + 32 B;
// Q8_1 = f16 d + f16 s + 32 B; Q2_K = 16 scales + 64 qs + 2 f16; Q3_K = 32 hmask + 64 qs +
// 12 scales + f16; Q4_K = 2 f16 + 12 scales + 128 qs; Q5_K adds 32 qh; Q6_K = 128 ql + 64 qh +
// 16 scales + f16; Q8_K = f32 d + 256 qs + 16 i16 bsums.
constexpr std::array<DTypeTraits, 20> kTraits = {{
    {DType::F32, "f32", 1, 4, false, true},
    {DType::F16, "f16", 1, 2, false, true},
    {DType::Q4_0, "q4_0", 32, 18, true, true},
    {DType::Q4_1, "q4_1", 32, 20, true, true},
    {DType::Q5_0, "q5_0", 32, 22, true, true},
    {DType::Q5_1, "q5_1", 32, 24, true, true},
    {DType::Q8_0, "q8_0", 32, 34, true, true},
    {DType::Q8_1, "q8_1", 32, 36, true, true},
    {DType::Q2_K, "q2_K", 256, 84, true, true},
    {DType::Q3_K, "q3_K", 256, 110, true, true},
    {DType::Q4_K, "q4_K", 256, 144, true, true},
    {DType::Q5_K, "q5_K", 256, 176, true, true},
    {DType::Q6_K, "q6_K", 256, 210, true, true},
    {DType::Q8_K, "q8_K", 256, 292, true, true},
    {DType::I8, "i8", 1, 1, false, false},
    {DType::I16, "i16", 1, 2, false, false},
    {DType::I32, "i32", 1, 4, false, true},
    {DType::I64, "i64", 1, 8, false, false},
    {DType::F64, "f64", 1, 8, false, false},
    {DType::BF16, "bf16", 1, 2, false, true},
}};

const DTypeTraits* find(int64_t id) {
  for (const auto& t : kTraits)
    if (static_cast<int64_t>(t.type) == id) return &t;
  return nullptr;
}

}  // namespace

const DTypeTraits& dtype_traits(DType t) {
  const DTypeTraits* tr = find(static_cast<int64_t>(t));
  if (!tr) throw std::invalid_argument("unknown dtype id " + std::to_string(static_cast<int>(t)));
  return *tr;
}

std::optional<DType> dtype_from_id(int64_t id) {
  const DTypeTraits* tr = find(id);
  if (!tr) return std::nullopt;
  return tr->type;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTraits) {
    if (t.name.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < name.size() && eq; ++i)
      eq = std::tolower(static_cast<unsigned char>(name[i])) ==
           std::tolower(static_cast<unsigned char>(t.name[i]));
    if (eq) return t.type;
  }
  return std::nullopt;
}

size_t dtype_row_size(DType t, int64_t n) { return dtype_nbytes(t, n); }

size_t dtype_nbytes(DType t, int64_t n) {
  const DTypeTraits& tr = dtype_traits(t);
  if (n < 0) throw std::invalid_argument("negative element count for dtype " + std::string(tr.name));
  if (n % tr.block_size != 0)
    throw std::invalid_argument("element count " + std::to_string(n) + " is not a multiple of the " +
                                std::string(tr.name) + " block size " +
                                std::to_string(tr.block_size));
  const uint64_t blocks = static_cast<uint64_t>(n / tr.block_size);
  if (blocks > std::numeric_limits<size_t>::max() / tr.type_size)
    throw std::overflow_error("byte count of " + std::to_string(n) + " " + std::string(tr.name) +
                              " elements overflows");
  return blocks * tr.type_size;
}

}  // namespace minfer
