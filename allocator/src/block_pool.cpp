#include "minfer/block_pool.h"

#include <stdexcept>
#include <string>

namespace minfer::alloc {

BlockPool::BlockPool(int32_t n_blocks) {
  if (n_blocks < 0) throw std::invalid_argument("BlockPool: n_blocks must be >= 0, got " + std::to_string(n_blocks));
  const auto n = static_cast<size_t>(n_blocks);
  ref_.assign(n, 0);
  hash_.assign(n, 0);
  has_hash_.assign(n, 0);
  prev_.assign(n, kNone);
  next_.assign(n, kNone);
  free_.reserve(n);
  // Stack order: block 0 is handed out first.
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void BlockPool::check(int32_t b) const {
  if (b < 0 || b >= n_blocks())
    throw std::out_of_range("BlockPool: block " + std::to_string(b) + " outside [0, " + std::to_string(n_blocks()) + ")");
}

void BlockPool::lru_unlink(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (prev_[i] != kNone) next_[static_cast<size_t>(prev_[i])] = next_[i];
  else lru_head_ = next_[i];
  if (next_[i] != kNone) prev_[static_cast<size_t>(next_[i])] = prev_[i];
  else lru_tail_ = prev_[i];
  prev_[i] = next_[i] = kNone;
  --n_cached_;
}

void BlockPool::lru_push_back(int32_t b) {
  const auto i = static_cast<size_t>(b);
  prev_[i] = lru_tail_;
  next_[i] = kNone;
  if (lru_tail_ != kNone) next_[static_cast<size_t>(lru_tail_)] = b;
  else lru_head_ = b;
  lru_tail_ = b;
  ++n_cached_;
}

void BlockPool::forget_hash(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (!has_hash_[i]) return;
  by_hash_.erase(hash_[i]);
  has_hash_[i] = 0;
}

int32_t BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (lru_head_ != kNone) {
    b = lru_head_;
    lru_unlink(b);
    forget_hash(b);
    ++stats_.evictions;
  } else {
    return kNone;
  }
  ref_[static_cast<size_t>(b)] = 1;
  ++n_used_;
  ++stats_.allocations;
  return b;
}

bool BlockPool::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n < 0) throw std::invalid_argument("BlockPool: cannot allocate " + std::to_string(n) + " blocks");
  if (n > n_free()) return false;
  for (int32_t i = 0; i < n; ++i) out.push_back(allocate());
  return true;
}

void BlockPool::retain(int32_t b) {
  check(b);
  auto& r = ref_[static_cast<size_t>(b)];
  if (r == 0) throw std::logic_error("BlockPool: retain of free block " + std::to_string(b));
  ++r;
}

void BlockPool::release(int32_t b) {
  check(b);
  auto& r = ref_[static_cast<size_t>(b)];
  if (r == 0) throw std::logic_error("BlockPool: release of free block " + std::to_string(b) + " (double release)");
  if (--r > 0) return;
  --n_used_;
  if (has_hash_[static_cast<size_t>(b)]) lru_push_back(b);
  else free_.push_back(b);
}

int32_t BlockPool::ref_count(int32_t b) const {
  check(b);
  return ref_[static_cast<size_t>(b)];
}

bool BlockPool::has_hash(int32_t b) const {
  check(b);
  return has_hash_[static_cast<size_t>(b)] != 0;
}

bool BlockPool::set_hash(int32_t b, uint64_t hash) {
  check(b);
  const auto i = static_cast<size_t>(b);
  if (ref_[i] == 0) throw std::logic_error("BlockPool: set_hash on free block " + std::to_string(b));
  if (has_hash_[i] && hash_[i] == hash) return true;
  forget_hash(b);
  if (by_hash_.contains(hash)) return false;
  by_hash_.emplace(hash, b);
  hash_[i] = hash;
  has_hash_[i] = 1;
  return true;
}

void BlockPool::clear_hash(int32_t b) {
  check(b);
  if (ref_[static_cast<size_t>(b)] == 0 && has_hash_[static_cast<size_t>(b)]) {
    lru_unlink(b);
    free_.push_back(b);
  }
  forget_hash(b);
}

int32_t BlockPool::find(uint64_t hash) {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) {
    ++stats_.cache_misses;
    return kNone;
  }
  const int32_t b = it->second;
  auto& r = ref_[static_cast<size_t>(b)];
  if (r == 0) {
    lru_unlink(b);
    ++n_used_;
  }
  ++r;
  ++stats_.cache_hits;
  return b;
}

void BlockPool::drop_cache() {
  while (lru_head_ != kNone) {
    const int32_t b = lru_head_;
    lru_unlink(b);
    forget_hash(b);
    free_.push_back(b);
  }
}

}  // namespace minfer::alloc
