// Open-addressing hash tables for the vocabulary (text -> id) and the merge table (id pair ->
// merge). Node-based std::unordered_map made loading the 151,936-token Qwen vocabulary spend most
// of its time in allocation and pointer chasing; these are flat arrays with linear probing, built
// once and then read-only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::tokenizer {

/// 64-bit FNV-1a, then a final mix so the low bits (used for the slot) depend on every byte.
inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

inline uint64_t hash_u64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/// Capacity (power of two) for n entries at load factor <= 1/2.
inline size_t flat_capacity(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  return cap;
}

/// Maps the texts of a fixed token list to their ids. The index holds ids only; every lookup is
/// given the same list it was built from (so copying or moving the owner needs no fix-up).
class TextIndex {
 public:
  TextIndex() = default;

  /// Indexes texts[0..n). Returns -1 on success, or the id of the first text already present
  /// (a duplicate), leaving that id unindexed.
  int32_t build(const std::vector<std::string>& texts) {
    const size_t cap = flat_capacity(texts.size());
    mask_ = cap - 1;
    slots_.assign(cap, Slot{0, -1});
    for (size_t i = 0; i < texts.size(); ++i) {
      const uint64_t h = hash_bytes(texts[i]);
      size_t s = h & mask_;
      for (; slots_[s].id >= 0; s = (s + 1) & mask_) {
        if (slots_[s].tag == static_cast<uint32_t>(h >> 32) && texts[slots_[s].id] == texts[i]) {
          return static_cast<int32_t>(i);
        }
      }
      slots_[s] = {static_cast<uint32_t>(h >> 32), static_cast<int32_t>(i)};
    }
    return -1;
  }

  /// The id whose text is `s`, or -1. `texts` is the list given to build().
  int32_t find(std::string_view s, const std::vector<std::string>& texts) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(s);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_; slots_[i].id >= 0; i = (i + 1) & mask_) {
      if (slots_[i].tag == tag && texts[slots_[i].id] == s) return slots_[i].id;
    }
    return -1;
  }

 private:
  struct Slot {
    uint32_t tag;  // high hash bits: most mismatches are rejected without touching the text
    int32_t id;    // -1: empty
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

/// uint64 key -> trivially copyable value; keys are never UINT64_MAX (the empty marker).
template <class V>
class U64Map {
 public:
  void reserve(size_t n) {
    const size_t cap = flat_capacity(n);
    mask_ = cap - 1;
    slots_.assign(cap, Slot{kEmpty, V{}});
  }

  /// Inserts when absent; returns false (and keeps the old value) when present. reserve() must
  /// have been called with room for every insertion.
  bool try_emplace(uint64_t key, const V& v) {
    for (size_t i = hash_u64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, v};
        ++size_;
        return true;
      }
      if (slots_[i].key == key) return false;
    }
  }

  const V* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash_u64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  struct Slot {
    uint64_t key;
    V value;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace minfer::tokenizer
