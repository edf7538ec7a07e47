// Internal helpers shared by the allocator sources; not installed.
#pragma once

#include <cstddef>
#include <optional>

namespace minfer::alloc::detail {

inline bool is_power_of_two(size_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

// Rounds x up to a multiple of the power of two `alignment`; nullopt when that overflows size_t.
inline std::optional<size_t> align_up(size_t x, size_t alignment) noexcept {
  const size_t mask = alignment - 1;
  if (x > static_cast<size_t>(-1) - mask) return std::nullopt;
  return (x + mask) & ~mask;
}

}  // namespace minfer::alloc::detail
