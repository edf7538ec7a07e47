// plan_layout: sweep the steps in order, allocate at first use, free after last use.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>

#include "detail.h"
#include "minfer/allocator.h"

namespace minfer::alloc {
namespace {

void validate(std::span<const BufferRequest> requests) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& r = requests[i];
    const std::string where = "plan_layout: request " + std::to_string(i) + ": ";
    if (!detail::is_power_of_two(r.alignment)) {
      throw std::invalid_argument(where + "alignment " + std::to_string(r.alignment) +
                                  " is not a power of two");
    }
    if (r.last_use < r.first_use) {
      throw std::invalid_argument(where + "last_use " + std::to_string(r.last_use) +
                                  " < first_use " + std::to_string(r.first_use));
    }
    if (r.inplace_of < -1 || (r.inplace_of >= 0 && static_cast<size_t>(r.inplace_of) >= i)) {
      throw std::invalid_argument(where + "inplace_of " + std::to_string(r.inplace_of) +
                                  " is neither -1 nor the index of an earlier request");
    }
  }
}

// The union of the byte ranges ever handed out, to measure how many bytes land on reused storage.
class UsedBytes {
 public:
  // Returns how many bytes of [offset, offset + size) were already used, then marks them all used.
  size_t overlap_then_add(size_t offset, size_t size) {
    const size_t end = offset + size;
    size_t merged_begin = offset;
    size_t merged_end = end;
    size_t overlap = 0;
    // Ranges are disjoint and never touch; start at the last one beginning at or before `offset`.
    auto it = ranges_.upper_bound(offset);
    if (it != ranges_.begin() && std::prev(it)->second >= offset) --it;
    for (; it != ranges_.end() && it->first <= end; it = ranges_.erase(it)) {
      const size_t lo = std::max(it->first, offset);
      const size_t hi = std::min(it->second, end);
      if (hi > lo) overlap += hi - lo;
      merged_begin = std::min(merged_begin, it->first);
      merged_end = std::max(merged_end, it->second);
    }
    ranges_.emplace(merged_begin, merged_end);
    return overlap;
  }

 private:
  std::map<size_t, size_t> ranges_;  // begin -> end
};

// Max over steps of the bytes of the live arena blocks. Each request counts the block it owns
// (for an in-place taker: the block it inherited); a request taken over in place stops counting at
// the step where its successor is born, so a shared block counts once.
size_t peak_live_bytes(std::span<const BufferRequest> requests, const std::vector<size_t>& block,
                       const std::vector<bool>& taken) {
  struct Event {
    int64_t step;
    size_t bytes;
    bool add;
  };
  std::vector<Event> events;
  events.reserve(2 * requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& r = requests[i];
    if (block[i] == 0) continue;
    const int64_t last = int64_t{r.last_use} - (taken[i] ? 1 : 0);
    if (last < r.first_use) continue;
    events.push_back({r.first_use, block[i], true});
    if (r.last_use != kForever) events.push_back({last + 1, block[i], false});
  }
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.step < b.step; });
  // Unsigned wrap-around is harmless: the sum after all events of one step is the true live size.
  size_t live = 0;
  size_t peak = 0;
  for (size_t e = 0; e < events.size();) {
    const int64_t step = events[e].step;
    for (; e < events.size() && events[e].step == step; ++e) {
      live = events[e].add ? live + events[e].bytes : live - events[e].bytes;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

Layout plan_layout(std::span<const BufferRequest> requests) {
  validate(requests);
  const size_t n = requests.size();

  Layout layout;
  layout.offsets.assign(n, 0);
  AllocStats& stats = layout.stats;
  stats.n_requests = n;

  // Births ordered by (first_use, index) and deaths by (last_use, index): stable sorts of 0..n-1.
  std::vector<size_t> births(n);
  std::iota(births.begin(), births.end(), size_t{0});
  std::stable_sort(births.begin(), births.end(), [&](size_t a, size_t b) {
    return requests[a].first_use < requests[b].first_use;
  });
  std::vector<size_t> deaths;
  deaths.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (requests[i].last_use != kForever) deaths.push_back(i);
  }
  std::stable_sort(deaths.begin(), deaths.end(), [&](size_t a, size_t b) {
    return requests[a].last_use < requests[b].last_use;
  });

  OffsetAllocator arena;
  UsedBytes used;
  std::vector<size_t> block(n, 0);   // size of the arena block request i owns (0: none)
  std::vector<bool> taken(n, false);  // request i's block was taken over in place
  std::vector<bool> inplace(n, false);  // request i took over its inplace_of block

  auto place = [&](size_t i) {
    const BufferRequest& r = requests[i];
    if (r.size == 0) return;  // offset 0, occupies nothing
    if (r.inplace_of >= 0) {
      const auto p = static_cast<size_t>(r.inplace_of);
      const BufferRequest& parent = requests[p];
      // The parent is still live here: it dies at this step and deaths run after births.
      if (parent.last_use == r.first_use && parent.last_use != kForever && parent.size >= r.size &&
          !taken[p] && block[p] != 0 && layout.offsets[p] % r.alignment == 0) {
        layout.offsets[i] = layout.offsets[p];
        block[i] = block[p];
        taken[p] = true;
        inplace[i] = true;
        stats.inplace_hits += 1;
        stats.bytes_reused += r.size;
        return;
      }
    }
    const size_t offset = arena.allocate(r.size, r.alignment);
    layout.offsets[i] = offset;
    block[i] = r.size;
    stats.bytes_reused += used.overlap_then_add(offset, r.size);
  };

  size_t next_birth = 0;
  size_t next_death = 0;
  while (next_birth < n || next_death < deaths.size()) {
    int64_t step = INT64_MAX;
    if (next_birth < n) step = requests[births[next_birth]].first_use;
    if (next_death < deaths.size()) {
      step = std::min<int64_t>(step, requests[deaths[next_death]].last_use);
    }
    for (; next_birth < n && requests[births[next_birth]].first_use == step; ++next_birth) {
      place(births[next_birth]);
    }
    // Frees come after the births of the same step: outputs never alias inputs still being read.
    for (; next_death < deaths.size() && requests[deaths[next_death]].last_use == step;
         ++next_death) {
      const size_t i = deaths[next_death];
      if (block[i] != 0 && !taken[i]) arena.free(layout.offsets[i], block[i]);
    }
  }

  layout.arena_size = arena.high_water();
  stats.arena_bytes = layout.arena_size;
  stats.peak_live_bytes = peak_live_bytes(requests, block, taken);

  std::vector<size_t> slots;
  slots.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (requests[i].size != 0 && !inplace[i]) slots.push_back(layout.offsets[i]);
  }
  std::sort(slots.begin(), slots.end());
  stats.n_slots = static_cast<size_t>(std::unique(slots.begin(), slots.end()) - slots.begin());
  return layout;
}

}  // namespace minfer::alloc
