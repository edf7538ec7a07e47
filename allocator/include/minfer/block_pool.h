// minfer block pool: reference-counted fixed-size blocks with an optional content cache.
//
// The second reusable piece of the allocator library, as independent of tensors and devices as
// the first: it hands out block *indices* in [0, n_blocks). A paged KV cache keeps one pool for
// its token blocks (runtime/kv_cache.h) and maps index b to bytes [b * block_bytes, (b + 1) *
// block_bytes) of its own storage; anything else made of equal-sized pages can do the same.
//
// Reference counts let several owners share a block (sequences forked from one prompt, a
// speculative draft, the server's prefix cache). A block whose count drops to 0 is free. A free
// block that was given a content hash (set_hash) stays *cached*: find(hash) revives it with its
// content intact until allocate() needs the space and evicts it, least recently freed first —
// vLLM's prefix caching (Kwon et al. 2023; the "automatic prefix caching" design), in a form
// that knows nothing of tokens: the caller decides what the hash means.
//
// Example:
//   minfer::alloc::BlockPool pool(1024);
//   int32_t b = pool.allocate();        // ref 1
//   pool.retain(b);                     // shared by a fork: ref 2
//   pool.set_hash(b, h);                // full block: findable by its content hash
//   pool.release(b); pool.release(b);   // ref 0: free but cached
//   int32_t c = pool.find(h);           // == b, ref 1 again, content intact
//
// Deterministic: the same calls give the same indices. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace minfer::alloc {

class BlockPool {
 public:
  /// Counters since construction (or the last reset_stats()).
  struct Stats {
    int64_t allocations = 0;  ///< blocks handed out by allocate()
    int64_t evictions = 0;    ///< cached blocks whose content allocate() discarded
    int64_t cache_hits = 0;   ///< find() calls that returned a block
    int64_t cache_misses = 0; ///< find() calls that returned -1
  };

  /// A pool of n_blocks blocks, all free, none cached. Throws std::invalid_argument for n_blocks < 0.
  explicit BlockPool(int32_t n_blocks);

  int32_t n_blocks() const noexcept { return static_cast<int32_t>(ref_.size()); }
  /// Blocks allocate() can hand out now: every unreferenced block, cached ones included.
  int32_t n_free() const noexcept { return n_blocks() - n_used_; }
  /// Blocks with a reference count > 0.
  int32_t n_used() const noexcept { return n_used_; }
  /// Unreferenced blocks that still hold cached content (findable by hash).
  int32_t n_cached() const noexcept { return n_cached_; }

  /// Hands out one unreferenced block with reference count 1 and no hash. Blocks that hold no
  /// cached content go first (most recently freed first, which keeps memory warm); then the
  /// least recently freed cached block is evicted (its hash forgotten). Returns -1 when every
  /// block is referenced; the pool is unchanged then.
  int32_t allocate();

  /// All or nothing: appends n blocks to `out` and returns true, or returns false and changes
  /// nothing when fewer than n are free. Throws std::invalid_argument for n < 0.
  bool allocate(int32_t n, std::vector<int32_t>& out);

  /// Adds a reference to block b, which must be referenced (ref > 0). Throws std::out_of_range for
  /// an index outside the pool, std::logic_error for an unreferenced block (revive cached blocks
  /// with find()).
  void retain(int32_t b);

  /// Drops a reference. At 0 the block becomes free — cached when it has a hash. Throws
  /// std::out_of_range / std::logic_error (not referenced: a double release) like retain().
  void release(int32_t b);

  /// Reference count of b (0: free). Throws std::out_of_range.
  int32_t ref_count(int32_t b) const;

  /// Registers referenced block b as holding the content identified by `hash`. A block already
  /// registered under that hash keeps it (first writer wins; b is then left without a hash and
  /// false is returned); a hash b had before is dropped. Throws like retain() for an
  /// unreferenced or out-of-range b.
  bool set_hash(int32_t b, uint64_t hash);

  /// Forgets b's hash, if any (its content is about to change). Throws std::out_of_range.
  void clear_hash(int32_t b);

  /// The block registered under `hash`, with one more reference (a cached block is revived to
  /// ref 1 and leaves the eviction order), or -1 when none is.
  int32_t find(uint64_t hash);

  /// True when b carries a hash (set_hash succeeded and it was not evicted). Throws std::out_of_range.
  bool has_hash(int32_t b) const;

  /// Forgets every cached block's content (they become plain free blocks). Referenced blocks keep
  /// their hashes.
  void drop_cache();

  const Stats& stats() const noexcept { return stats_; }
  void reset_stats() noexcept { stats_ = {}; }

 private:
  static constexpr int32_t kNone = -1;
  void check(int32_t b) const;
  void lru_unlink(int32_t b);
  void lru_push_back(int32_t b);
  void forget_hash(int32_t b);

  std::vector<int32_t> ref_;       // reference count per block
  std::vector<uint64_t> hash_;     // content hash per block, valid when has_hash_[b]
  std::vector<uint8_t> has_hash_;
  std::vector<int32_t> free_;      // unreferenced blocks without a hash (a stack)
  std::vector<int32_t> prev_, next_;  // the cached blocks' eviction order (doubly linked)
  int32_t lru_head_ = kNone, lru_tail_ = kNone;  // head: evicted first
  std::unordered_map<uint64_t, int32_t> by_hash_;
  int32_t n_used_ = 0, n_cached_ = 0;
  Stats stats_;
};

}  // namespace minfer::alloc
