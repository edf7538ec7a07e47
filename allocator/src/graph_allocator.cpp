// GraphAllocator: reserve the worst case once, then hand out cached or freshly planned layouts.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "minfer/allocator.h"

namespace minfer::alloc {
namespace {

// FNV-1a, 64-bit (http://www.isthe.com/chongo/tech/comp/fnv/), over fixed-width field values so
// the hash does not depend on struct padding.
struct Fnv1a {
  uint64_t state = 14695981039346656037ull;
  void add(uint64_t value) noexcept {
    for (int byte = 0; byte < 8; ++byte) {
      state ^= (value >> (8 * byte)) & 0xffu;
      state *= 1099511628211ull;
    }
  }
};

}  // namespace

uint64_t hash_requests(std::span<const BufferRequest> requests) noexcept {
  Fnv1a h;
  h.add(requests.size());
  for (const BufferRequest& r : requests) {
    h.add(r.size);
    h.add(r.alignment);
    h.add(static_cast<uint32_t>(r.first_use));
    h.add(static_cast<uint32_t>(r.last_use));
    h.add(static_cast<uint32_t>(r.inplace_of));
  }
  return h.state;
}

GraphAllocator::GraphAllocator(size_t cache_capacity) : cache_capacity_(cache_capacity) {
  if (cache_capacity == 0) {
    throw std::invalid_argument("GraphAllocator: cache_capacity must be at least 1");
  }
}

GraphAllocator::Entry* GraphAllocator::find(uint64_t hash,
                                            std::span<const BufferRequest> requests) {
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->hash == hash && std::ranges::equal(it->requests, requests)) {
      cache_.splice(cache_.begin(), cache_, it);  // most recently used first
      return &cache_.front();
    }
  }
  return nullptr;
}

GraphAllocator::Entry& GraphAllocator::insert(uint64_t hash,
                                              std::span<const BufferRequest> requests,
                                              Layout layout) {
  cache_.push_front(Entry{hash, {requests.begin(), requests.end()}, std::move(layout)});
  if (cache_.size() > cache_capacity_) cache_.pop_back();
  return cache_.front();
}

void GraphAllocator::reserve(std::span<const BufferRequest> requests) {
  const uint64_t hash = hash_requests(requests);
  Entry* entry = find(hash, requests);
  if (entry == nullptr) {
    Layout layout = plan_layout(requests);
    ++n_plans_;
    entry = &insert(hash, requests, std::move(layout));
  }
  arena_grew_ = entry->layout.arena_size > arena_size_;
  arena_size_ = std::max(arena_size_, entry->layout.arena_size);
}

const Layout& GraphAllocator::allocate(std::span<const BufferRequest> requests) {
  const uint64_t hash = hash_requests(requests);
  Entry* entry = find(hash, requests);
  const bool reused = entry != nullptr;
  if (!reused) {
    Layout layout = plan_layout(requests);
    ++n_plans_;
    // Cached even when it does not fit: a retry after reserve() then costs no planning.
    entry = &insert(hash, requests, std::move(layout));
  }
  const size_t need = entry->layout.arena_size;
  if (need > arena_size_ && !allow_grow_) {
    last_fits_ = false;
    arena_grew_ = false;
    throw std::length_error("GraphAllocator::allocate: the graph needs an arena of " +
                            std::to_string(need) + " bytes but " + std::to_string(arena_size_) +
                            " bytes are reserved; reserve() the worst case first or call "
                            "set_allow_grow(true)");
  }
  arena_grew_ = need > arena_size_;
  arena_size_ = std::max(arena_size_, need);
  last_fits_ = true;
  if (reused) ++n_layout_reuses_;
  return entry->layout;
}

void GraphAllocator::clear() noexcept {
  cache_.clear();
  arena_size_ = 0;
  arena_grew_ = false;
  last_fits_ = true;
  n_layout_reuses_ = 0;
  n_plans_ = 0;
}

}  // namespace minfer::alloc
