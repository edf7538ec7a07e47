// minfer allocator: liveness-based placement of short-lived buffers inside one arena.
//
// The library knows nothing of tensors, devices or graphs. It answers one question: given a list of
// buffers with sizes, alignments and lifetimes (in abstract "steps", e.g. graph node indices), at
// which byte offset of a single arena should each buffer live so that no two buffers that are alive
// at the same time share a byte, while the arena stays small? A backend then allocates `arena_size`
// bytes once (malloc, cudaMalloc, ...) and places buffer i at `base + offsets[i]`.
//
// Three layers, each usable on its own:
//   OffsetAllocator  - an online best-fit allocator over byte offsets (free list with coalescing,
//                      arena growing at its end, optional fixed capacity).
//   plan_layout()    - a pure planner: sweeps the steps in order, allocating buffers at their first
//                      use and freeing them after their last use, with optional in-place takeover.
//   GraphAllocator   - the stateful object a backend keeps per graph: reserve the worst case once,
//                      then allocate step after step with a small cache of layouts.
//
// Only the C++ standard library is used. All functions are deterministic: equal input gives equal
// output. See docs/allocator.md for the model, the algorithm and a comparison with ggml-alloc.
//
// Example:
//   using namespace minfer::alloc;
//   std::vector<BufferRequest> req = {
//       {.size = 4096, .alignment = 64, .first_use = 0, .last_use = 1},   // x  = f(input)
//       {.size = 4096, .alignment = 64, .first_use = 1, .last_use = 2,
//        .inplace_of = 0},                                                 // y  = g(x), may reuse x
//       {.size = 1024, .alignment = 64, .first_use = 2, .last_use = kForever},  // output
//   };
//   Layout layout = plan_layout(req);
//   void* base = aligned_alloc(64, layout.arena_size);  // 5120 bytes; offsets are from base
//   char* y = static_cast<char*>(base) + layout.offsets[1];
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <new>
#include <span>
#include <string>
#include <vector>

namespace minfer::alloc {

/// A `last_use` value meaning "never freed" (graph outputs, persistent buffers).
inline constexpr int32_t kForever = std::numeric_limits<int32_t>::max();

/// One buffer to place. Steps are abstract integers (typically the index of the graph node that
/// writes or reads the buffer); only their order matters.
struct BufferRequest {
  /// Size in bytes. 0 is allowed: the buffer gets offset 0 (aligned for any alignment) and
  /// occupies nothing.
  size_t size = 0;
  /// Required alignment of the offset in bytes; a power of two (1 = none). Offsets are relative to
  /// the arena base, so the backend must allocate the arena with at least the largest alignment.
  size_t alignment = 1;
  /// Step at which the buffer is first written.
  int32_t first_use = 0;
  /// Last step at which it is read, inclusive (>= first_use), or kForever (never freed).
  int32_t last_use = 0;
  /// Optional: index of an earlier request whose storage this one may take over in place (the op
  /// writing this buffer may overwrite that input while reading it). Honoured only when that
  /// request's last_use == this first_use (it dies exactly where this one is born), it is not
  /// kForever, its size >= this size, its offset satisfies this alignment, this size > 0, and no
  /// earlier request already took it over. Otherwise the request is silently placed normally.
  /// -1 = no in-place candidate.
  int32_t inplace_of = -1;

  friend bool operator==(const BufferRequest&, const BufferRequest&) = default;
};

/// Statistics of one layout.
struct AllocStats {
  /// Bytes the arena needs (== Layout::arena_size).
  size_t arena_bytes = 0;
  /// Max over steps of the summed sizes of the storage blocks alive at that step. A block is
  /// counted once while owned by an in-place chain, with the size of the request that allocated
  /// it. A lower bound for arena_bytes (blocks alive together are disjoint); arena_bytes /
  /// peak_live_bytes measures fragmentation and alignment padding.
  size_t peak_live_bytes = 0;
  /// Number of requests.
  size_t n_requests = 0;
  /// Number of distinct arena regions handed out: the number of distinct offsets among the
  /// requests with size > 0 that were not placed in place. Buffers that reuse the storage of a dead
  /// buffer at the same offset share a slot.
  size_t n_slots = 0;
  /// Bytes of requests that landed on storage previously occupied by a buffer that is dead (or
  /// dies at that step, for in-place takeovers, which count their full size). The sum of all sizes
  /// minus bytes_reused is the number of bytes placed on never-used memory.
  size_t bytes_reused = 0;
  /// Number of requests placed in place over their `inplace_of` buffer.
  size_t inplace_hits = 0;

  friend bool operator==(const AllocStats&, const AllocStats&) = default;
};

/// Result of plan_layout: one offset per request, in request order.
struct Layout {
  /// offsets[i] is the byte offset of request i from the arena base; offsets[i] % alignment == 0
  /// and offsets[i] + size <= arena_size.
  std::vector<size_t> offsets;
  /// Bytes the arena needs to hold every buffer at its offset.
  size_t arena_size = 0;
  AllocStats stats;

  friend bool operator==(const Layout&, const Layout&) = default;
};

/// Thrown by OffsetAllocator when a fixed-capacity arena cannot hold an allocation. Derives from
/// std::bad_alloc so generic out-of-memory handlers catch it; what() names both sizes.
class ArenaOverflow : public std::bad_alloc {
 public:
  ArenaOverflow(size_t capacity, size_t requested, size_t alignment);
  const char* what() const noexcept override { return message_.c_str(); }
  /// The fixed capacity of the arena in bytes.
  size_t capacity() const noexcept { return capacity_; }
  /// The size of the allocation that did not fit, in bytes.
  size_t requested() const noexcept { return requested_; }

 private:
  size_t capacity_;
  size_t requested_;
  std::string message_;
};

/// An online offset allocator over one arena, best fit with coalescing.
///
/// Free space is a list of disjoint (offset, size) ranges sorted by offset; adjacent free ranges are
/// always merged. allocate() picks the smallest free range that can hold the request at its
/// alignment (ties: lowest offset); the alignment padding at the head of the chosen range and the
/// unused tail both go back to the free list. When no range fits, the arena grows at its end (a
/// free range touching the end is extended rather than skipped); high_water() is the arena size
/// needed so far. With a fixed capacity, growth beyond it throws ArenaOverflow.
///
/// Zero-size allocations return offset 0 and occupy nothing; free(offset, 0) is a no-op.
/// Complexity: O(number of free ranges) per allocate, O(log n) per free.
class OffsetAllocator {
 public:
  /// A disjoint byte range [offset, offset + size) of the arena.
  struct Range {
    size_t offset;
    size_t size;
    friend bool operator==(const Range&, const Range&) = default;
  };

  /// No capacity limit: the arena grows as needed.
  static constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

  /// capacity: maximum arena size in bytes (kUnbounded: no limit).
  explicit OffsetAllocator(size_t capacity = kUnbounded) : capacity_(capacity) {}

  /// Returns the offset of a new block of `size` bytes with offset % alignment == 0.
  /// Throws std::invalid_argument if alignment is not a power of two, ArenaOverflow if a fixed
  /// capacity is exceeded, std::length_error if offsets would overflow size_t.
  size_t allocate(size_t size, size_t alignment = 1);

  /// Returns the block [offset, offset + size) that allocate() handed out. Throws
  /// std::invalid_argument if no live block starts at `offset` with exactly that size (double free,
  /// wrong size); the allocator is unchanged then.
  void free(size_t offset, size_t size);

  /// Arena size needed so far: the maximum end offset of any block ever allocated.
  size_t high_water() const noexcept { return high_water_; }
  /// The fixed capacity (kUnbounded if none).
  size_t capacity() const noexcept { return capacity_; }
  /// Sum of the sizes of the live blocks.
  size_t live_bytes() const noexcept { return live_bytes_; }
  /// Number of live (allocated, not freed) blocks, zero-size ones excluded.
  size_t n_live() const noexcept { return live_.size(); }
  /// The free ranges below high_water(), sorted by offset, coalesced.
  std::vector<Range> free_ranges() const;

  /// Frees everything and sets high_water() back to 0. The capacity is kept.
  void reset() noexcept;

 private:
  size_t capacity_;
  size_t high_water_ = 0;
  size_t live_bytes_ = 0;
  std::map<size_t, size_t> free_;  // offset -> size, disjoint, never adjacent
  std::map<size_t, size_t> live_;  // offset -> size of each live block (validates free())
};

/// Plans the placement of `requests` in one arena. A pure, deterministic function.
///
/// Steps are swept in increasing order. At step s, first the requests with first_use == s are
/// placed in request-index order (a valid in-place request takes over its parent's storage; the
/// others go through OffsetAllocator best fit), then the requests with last_use == s are freed.
/// Freeing after allocating means an output written at step s never aliases a buffer still read at
/// step s, except for an explicit in-place takeover. Requests with last_use == kForever are never
/// freed. A buffer taken over in place hands its storage to its successor, which frees it at its own
/// last use (chains are allowed).
///
/// Throws std::invalid_argument naming the request index when an alignment is 0 or not a power of
/// two, last_use < first_use, or inplace_of is neither -1 nor the index of an earlier request.
/// Throws std::length_error if offsets would overflow size_t.
Layout plan_layout(std::span<const BufferRequest> requests);

/// The stateful planner a backend keeps per graph: measure once, then reuse.
///
/// Typical use: reserve() the worst-case graph (e.g. the largest prefill batch), allocate
/// arena_size() bytes of device memory once, then call allocate() for every graph to run and place
/// its buffers at base + offsets. allocate() returns a cached layout when the request list equals
/// one planned before (a hash, then a full comparison): no planning happens and n_layout_reuses()
/// increments. The cache keeps the `cache_capacity` most recently used layouts, so alternating
/// shapes (prefill, decode, prefill, ...) all hit.
///
/// If a new plan needs more than arena_size(), allocate() throws std::length_error, unless
/// set_allow_grow(true): then arena_size() grows to the new need and arena_grew() reports it so the
/// backend reallocates its arena before using the layout.
class GraphAllocator {
 public:
  /// cache_capacity: number of layouts kept (at least 1).
  explicit GraphAllocator(size_t cache_capacity = 4);

  /// Measure pass: plans `requests` and raises arena_size() to at least the plan's arena size.
  /// The plan is cached, so a following allocate() of the same requests is a reuse.
  /// Throws what plan_layout() throws.
  void reserve(std::span<const BufferRequest> requests);

  /// Returns the layout for `requests`: cached when an equal list was planned before, planned anew
  /// otherwise. The reference stays valid until the next reserve(), allocate() or clear().
  /// Throws std::length_error when the layout needs more than arena_size() and growth is not
  /// allowed (arena_size() is then unchanged, fits() turns false, and the plan stays cached so a
  /// retry after reserve() costs no planning), and what plan_layout() throws.
  const Layout& allocate(std::span<const BufferRequest> requests);

  /// True when the layout returned by the last allocate() fits in arena_size() (also true before
  /// any allocate()). Always true after a successful allocate(); false after a failed one.
  bool fits() const noexcept { return last_fits_; }

  /// Arena size in bytes the backend must provide: the max over all reserved plans and, with growth
  /// allowed, over all allocated plans. 0 before any reserve().
  size_t arena_size() const noexcept { return arena_size_; }

  /// True when the last reserve() or allocate() call increased arena_size().
  bool arena_grew() const noexcept { return arena_grew_; }

  /// Growth policy of allocate() (default false: a plan larger than the reserved arena throws).
  void set_allow_grow(bool allow) noexcept { allow_grow_ = allow; }
  bool allow_grow() const noexcept { return allow_grow_; }

  /// Number of allocate() calls answered from the cache.
  size_t n_layout_reuses() const noexcept { return n_layout_reuses_; }
  /// Number of plan_layout() runs (reserve or allocate cache misses).
  size_t n_plans() const noexcept { return n_plans_; }
  /// Number of cached layouts.
  size_t n_cached() const noexcept { return cache_.size(); }

  /// Drops the cache and the reserved size; counters are reset too.
  void clear() noexcept;

 private:
  struct Entry {
    uint64_t hash;
    std::vector<BufferRequest> requests;
    Layout layout;
  };

  // Returns the cached entry (moved to the front) or nullptr.
  Entry* find(uint64_t hash, std::span<const BufferRequest> requests);
  Entry& insert(uint64_t hash, std::span<const BufferRequest> requests, Layout layout);

  size_t cache_capacity_;
  std::list<Entry> cache_;  // most recently used first
  size_t arena_size_ = 0;
  bool allow_grow_ = false;
  bool arena_grew_ = false;
  bool last_fits_ = true;
  size_t n_layout_reuses_ = 0;
  size_t n_plans_ = 0;
};

/// Hash of a request list (FNV-1a over every field), used as the GraphAllocator cache key.
uint64_t hash_requests(std::span<const BufferRequest> requests) noexcept;

}  // namespace minfer::alloc
