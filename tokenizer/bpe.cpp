#include "tokenizer/bpe.h"

#include <algorithm>
#include <stdexcept>

#include "tokenizer/unicode.h"

namespace minfer::tokenizer {

BpeModel::BpeModel(const std::vector<std::string>& merges, const Lookup& lookup) {
  const auto& alphabet = byte_to_unicode();
  for (int b = 0; b < 256; ++b) byte_token_[b] = lookup(alphabet[b]);

  pairs_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    // Byte-level token texts never contain a plain space (0x20 is written as U+0120 'Ġ'), so the
    // separator is unambiguous; search from 1 like llama.cpp in case a part were a lone space.
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      throw std::invalid_argument("tokenizer: merge " + std::to_string(i) + " '" + m +
                                  "' is not of the form 'left right'");
    }
    const std::string_view left(m.data(), sp);
    const std::string_view right(m.data() + sp + 1, m.size() - sp - 1);
    const int32_t a = lookup(left);
    const int32_t b = lookup(right);
    joined.assign(left);
    joined.append(right);
    const int32_t c = lookup(joined);
    if (a < 0 || b < 0 || c < 0) {
      const std::string_view missing = a < 0 ? left : b < 0 ? right : std::string_view(joined);
      throw std::invalid_argument("tokenizer: merge " + std::to_string(i) + " '" + m +
                                  "' references unknown token '" + std::string(missing) + "'");
    }
    pairs_.try_emplace(key(a, b), Merge{static_cast<int32_t>(i), c});
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  struct Sym {
    int32_t id;
    int32_t prev, next;  // indices into syms, -1 at the ends
  };
  struct Cand {
    int32_t rank;
    int32_t left;  // index of the left symbol; equals its first byte's offset, so it orders by position
    int32_t left_id, right_id, merged;
  };
  // Min-heap on (rank, left): std heap functions build a max-heap, so the comparison is reversed.
  auto worse = [](const Cand& x, const Cand& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.left > y.left;
  };
  thread_local std::vector<Sym> syms;
  thread_local std::vector<Cand> heap;
  syms.clear();
  heap.clear();

  const auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = byte_token_[static_cast<uint8_t>(word[i])];
    if (id < 0) {
      throw std::runtime_error("tokenizer: byte 0x" +
                               std::string(1, "0123456789abcdef"[(uint8_t(word[i]) >> 4)]) +
                               std::string(1, "0123456789abcdef"[uint8_t(word[i]) & 15]) +
                               " has no token in the vocabulary");
    }
    syms.push_back({id, i - 1, i + 1 < n ? i + 1 : -1});
  }
  if (n == 1) {
    out.push_back(syms[0].id);
    return;
  }
  auto push_pair = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = syms[l].next;
    if (r < 0) return;
    if (const Merge* m = find(syms[l].id, syms[r].id)) {
      heap.push_back({m->rank, l, syms[l].id, syms[r].id, m->id});
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Cand c = heap.back();
    heap.pop_back();
    Sym& l = syms[c.left];
    // Stale when the left symbol was absorbed (id -1) or either side has grown since: a symbol
    // only ever grows, so matching ids mean the pair is exactly the one that was queued.
    if (l.id != c.left_id || l.next < 0 || syms[l.next].id != c.right_id) continue;
    Sym& r = syms[l.next];
    l.id = c.merged;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    push_pair(l.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

}  // namespace minfer::tokenizer
