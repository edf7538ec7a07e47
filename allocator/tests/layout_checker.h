// Brute-force verification of a Layout, written independently of plan_layout(): it re-derives every
// property from the request list and the offsets alone, pair by pair and step by step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "minfer/allocator.h"

namespace minfer::alloc::testing {

// Which requests the documented in-place rule must honour, given the offsets the planner chose for
// the parents. Takers of one parent are all born at the parent's death step, so "earlier taker"
// means lower index.
inline std::vector<bool> expected_inplace_hits(std::span<const BufferRequest> req,
                                               std::span<const size_t> offsets) {
  std::vector<bool> hit(req.size(), false);
  std::vector<bool> taken(req.size(), false);
  for (size_t i = 0; i < req.size(); ++i) {
    const BufferRequest& r = req[i];
    if (r.size == 0 || r.inplace_of < 0) continue;
    const size_t p = static_cast<size_t>(r.inplace_of);
    if (req[p].last_use == r.first_use && req[p].last_use != kForever && req[p].size >= r.size &&
        !taken[p] && offsets[p] % r.alignment == 0) {
      hit[i] = true;
      taken[p] = true;
    }
  }
  return hit;
}

// Returns "" when `layout` is a valid placement of `req` with exact statistics, else the first
// problem found.
inline std::string check_layout(std::span<const BufferRequest> req, const Layout& layout) {
  const size_t n = req.size();
  auto str = [](auto v) { return std::to_string(v); };
  if (layout.offsets.size() != n) return "offsets.size() " + str(layout.offsets.size());
  if (layout.stats.n_requests != n) return "stats.n_requests " + str(layout.stats.n_requests);
  if (layout.stats.arena_bytes != layout.arena_size) return "stats.arena_bytes != arena_size";
  const auto& off = layout.offsets;

  // Alignment, bounds, and arena size == the furthest end (no wasted tail).
  size_t max_end = 0;
  for (size_t i = 0; i < n; ++i) {
    if (off[i] % req[i].alignment != 0) {
      return "request " + str(i) + ": offset " + str(off[i]) + " not aligned to " +
             str(req[i].alignment);
    }
    if (req[i].size == 0) {
      if (off[i] != 0) return "request " + str(i) + ": empty request at offset " + str(off[i]);
      continue;
    }
    if (off[i] > layout.arena_size || req[i].size > layout.arena_size - off[i]) {
      return "request " + str(i) + " ends past the arena";
    }
    max_end = std::max(max_end, off[i] + req[i].size);
  }
  if (layout.arena_size != max_end) {
    return "arena_size " + str(layout.arena_size) + " != furthest end " + str(max_end);
  }

  // In-place: required where the rule allows it; in-place pairs (and chains) form the only
  // components allowed to share bytes while alive together.
  const std::vector<bool> hit = expected_inplace_hits(req, off);
  std::vector<size_t> root(n);
  std::iota(root.begin(), root.end(), size_t{0});
  auto find = [&](size_t x) {
    while (root[x] != x) x = root[x] = root[root[x]];
    return x;
  };
  size_t n_hits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!hit[i]) continue;
    const size_t p = static_cast<size_t>(req[i].inplace_of);
    if (off[i] != off[p]) return "request " + str(i) + ": in-place over " + str(p) + " not honoured";
    root[find(i)] = find(p);
    ++n_hits;
  }
  if (layout.stats.inplace_hits != n_hits) {
    return "stats.inplace_hits " + str(layout.stats.inplace_hits) + " != " + str(n_hits);
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (req[i].size == 0 || req[j].size == 0) continue;
      const bool alive_together =
          req[i].first_use <= req[j].last_use && req[j].first_use <= req[i].last_use;
      const bool share_bytes = off[i] < off[j] + req[j].size && off[j] < off[i] + req[i].size;
      if (alive_together && share_bytes && find(i) != find(j)) {
        return "requests " + str(i) + " and " + str(j) + " are alive together and overlap";
      }
    }
  }

  // Peak live bytes: evaluated at every birth step (the live set only grows at births). Requests
  // count the storage they occupy: an in-place taker its root's size. A parent taken over in place
  // no longer counts at its death step, which is its successor's birth step.
  std::vector<bool> taken(n, false);
  std::vector<size_t> storage(n);
  for (size_t i = 0; i < n; ++i) {
    storage[i] = req[i].size;
    if (hit[i]) {
      taken[static_cast<size_t>(req[i].inplace_of)] = true;
      storage[i] = storage[static_cast<size_t>(req[i].inplace_of)];
    }
  }
  size_t peak = 0;
  for (size_t s = 0; s < n; ++s) {
    const int32_t step = req[s].first_use;
    size_t live = 0;
    for (size_t i = 0; i < n; ++i) {
      if (req[i].first_use <= step && step <= req[i].last_use &&
          !(taken[i] && step == req[i].last_use)) {
        live += storage[i];
      }
    }
    peak = std::max(peak, live);
  }
  if (layout.stats.peak_live_bytes != peak) {
    return "stats.peak_live_bytes " + str(layout.stats.peak_live_bytes) + " != " + str(peak);
  }
  if (layout.arena_size < peak) return "arena_size below the live peak";

  // Slots: distinct offsets of the non-empty requests that were not placed in place.
  std::vector<size_t> slots;
  for (size_t i = 0; i < n; ++i) {
    if (req[i].size != 0 && !hit[i]) slots.push_back(off[i]);
  }
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  if (layout.stats.n_slots != slots.size()) {
    return "stats.n_slots " + str(layout.stats.n_slots) + " != " + str(slots.size());
  }

  // Reused bytes: in placement order (first_use, then index), the bytes of each buffer already
  // covered by buffers placed before it; in-place takeovers count whole.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return req[a].first_use < req[b].first_use; });
  size_t reused = 0;
  std::vector<std::pair<size_t, size_t>> placed;  // [begin, end)
  for (size_t i : order) {
    if (req[i].size == 0) continue;
    const size_t b = off[i];
    const size_t e = off[i] + req[i].size;
    if (hit[i]) {
      reused += req[i].size;
    } else {
      std::vector<std::pair<size_t, size_t>> cover;
      for (auto [pb, pe] : placed) {
        if (std::max(pb, b) < std::min(pe, e)) cover.push_back({std::max(pb, b), std::min(pe, e)});
      }
      std::sort(cover.begin(), cover.end());
      size_t reach = b;
      for (auto [cb, ce] : cover) {
        if (ce > reach) reused += ce - std::max(cb, reach);
        reach = std::max(reach, ce);
      }
    }
    placed.push_back({b, e});
  }
  if (layout.stats.bytes_reused != reused) {
    return "stats.bytes_reused " + str(layout.stats.bytes_reused) + " != " + str(reused);
  }
  return "";
}

}  // namespace minfer::alloc::testing
