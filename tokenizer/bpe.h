// Byte-level BPE merging of one pre-tokenized word.
//
// Algorithm (Sennrich et al. 2016, as run by Hugging Face `tokenizers` Word::merge_all and
// llama.cpp llm_tokenizer_bpe): start from one symbol per byte (the byte-level alphabet token of
// that byte), then repeatedly merge the adjacent pair with the lowest merge rank, the leftmost one
// on ties, until no adjacent pair has a merge. Implemented with a doubly linked symbol list and a
// min-heap of candidate pairs with lazy invalidation: O(n log n) per word of n bytes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/flat_index.h"

namespace minfer::tokenizer {

class BpeModel {
 public:
  /// Returns the id of the token whose (byte-level alphabet) text is the argument, or -1.
  using Lookup = std::function<int32_t(std::string_view)>;

  BpeModel() { byte_token_.fill(-1); }

  /// Builds the pair table from `merges` ("left right", rank = index). Throws
  /// std::invalid_argument naming the merge index when a merge has no separating space, or its
  /// left part, right part or concatenation is not a token. A repeated pair keeps its first rank.
  BpeModel(const std::vector<std::string>& merges, const Lookup& lookup);

  /// Appends the token ids of `word` (raw bytes, not byte-level encoded) to `out`. Throws
  /// std::runtime_error when a byte has no token of its own in the vocabulary.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  size_t n_merges() const { return pairs_.size(); }

 private:
  struct Merge {
    int32_t rank = 0;
    int32_t id = 0;  ///< token id of the concatenation
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* find(int32_t a, int32_t b) const { return pairs_.find(key(a, b)); }

  U64Map<Merge> pairs_;
  std::array<int32_t, 256> byte_token_;  ///< token of each single byte, -1 when missing
};

}  // namespace minfer::tokenizer
