// OffsetAllocator: best fit over a coalesced, offset-sorted free list; the arena grows at its end.
#include <iterator>
#include <stdexcept>
#include <string>

#include "detail.h"
#include "minfer/allocator.h"

namespace minfer::alloc {

ArenaOverflow::ArenaOverflow(size_t capacity, size_t requested, size_t alignment)
    : capacity_(capacity),
      requested_(requested),
      message_("arena of " + std::to_string(capacity) + " bytes cannot fit " +
               std::to_string(requested) + " more bytes (alignment " + std::to_string(alignment) +
               ")") {}

size_t OffsetAllocator::allocate(size_t size, size_t alignment) {
  if (!detail::is_power_of_two(alignment)) {
    throw std::invalid_argument("OffsetAllocator::allocate: alignment " +
                                std::to_string(alignment) + " is not a power of two");
  }
  if (size == 0) return 0;

  // Best fit: the smallest free range that holds `size` bytes after its alignment padding. Strict
  // '<' over offset order makes the lowest offset win ties, so the result is deterministic.
  auto best = free_.end();
  size_t best_offset = 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const auto [range_offset, range_size] = *it;
    const auto aligned = detail::align_up(range_offset, alignment);
    if (!aligned) continue;
    const size_t pad = *aligned - range_offset;
    if (pad > range_size || range_size - pad < size) continue;
    if (best == free_.end() || range_size < best->second) {
      best = it;
      best_offset = *aligned;
    }
  }

  if (best != free_.end()) {
    const auto [range_offset, range_size] = *best;
    free_.erase(best);
    // The chosen range was maximal (neighbours are live), so its leftovers need no coalescing.
    if (best_offset > range_offset) free_.emplace(range_offset, best_offset - range_offset);
    const size_t end = best_offset + size;
    if (end < range_offset + range_size) free_.emplace(end, range_offset + range_size - end);
  } else {
    // Grow at the end. A free range touching the end is extended instead of being skipped.
    auto last = free_.empty() ? free_.end() : std::prev(free_.end());
    const bool extend_last = last != free_.end() && last->first + last->second == high_water_;
    const size_t start = extend_last ? last->first : high_water_;
    const auto aligned = detail::align_up(start, alignment);
    if (!aligned || *aligned > static_cast<size_t>(-1) - size) {
      throw std::length_error("OffsetAllocator::allocate: " + std::to_string(size) +
                              " bytes at alignment " + std::to_string(alignment) +
                              " overflow the offset range");
    }
    const size_t end = *aligned + size;
    if (end > capacity_) throw ArenaOverflow(capacity_, size, alignment);
    best_offset = *aligned;
    if (extend_last) free_.erase(last);
    if (best_offset > start) free_.emplace(start, best_offset - start);
    high_water_ = end;
  }

  live_.emplace(best_offset, size);
  live_bytes_ += size;
  return best_offset;
}

void OffsetAllocator::free(size_t offset, size_t size) {
  if (size == 0) return;
  const auto live = live_.find(offset);
  if (live == live_.end() || live->second != size) {
    throw std::invalid_argument("OffsetAllocator::free: no live block of " + std::to_string(size) +
                                " bytes at offset " + std::to_string(offset));
  }
  live_.erase(live);
  live_bytes_ -= size;

  // Coalesce with the free neighbours so the free list never holds two adjacent ranges.
  size_t start = offset;
  size_t length = size;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + size) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += length;
      return;
    }
  }
  free_.emplace_hint(next, start, length);
}

std::vector<OffsetAllocator::Range> OffsetAllocator::free_ranges() const {
  std::vector<Range> out;
  out.reserve(free_.size());
  for (const auto& [offset, size] : free_) out.push_back({offset, size});
  return out;
}

void OffsetAllocator::reset() noexcept {
  free_.clear();
  live_.clear();
  live_bytes_ = 0;
  high_water_ = 0;
}

}  // namespace minfer::alloc
