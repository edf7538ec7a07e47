// A paged-attention test case (the op cases in tests/ops/cases_attention.cpp): sequences of
// given lengths whose blocks are scattered at random over a KV cache (optionally sharing a prefix
// of blocks), queries at the last positions of each sequence, and every block no sequence uses
// poisoned with NaN, so a kernel that reads outside its sequence produces NaN.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/op_harness.h"
#include "tensor/context.h"

namespace minfer::test {

struct PagedAttnCase {
  int64_t d = 64, dv = 64, n_head = 4, n_head_kv = 2;
  DType kv_type = DType::F16;
  int32_t block_size = 16;
  std::vector<int32_t> seq_len;  ///< length of each sequence (its queries included)
  std::vector<int32_t> n_query;  ///< queries of each sequence: its last n_query positions
  int32_t shared_blocks = 0;     ///< sequences 1.. reuse sequence 0's first blocks (a forked prefix)
  int32_t spare_blocks = 3;      ///< blocks no sequence uses (poisoned)
  bool interleave = false;       ///< mix the sequences' queries in the batch instead of grouping them
};

/// The random layout of a case: block table [max_blocks, n_seq], queries' pos/seq, used blocks.
struct PagedAttnLayout {
  int32_t n_blocks = 0, max_blocks = 0;
  std::vector<int32_t> table, pos, seq;
  std::vector<uint8_t> used;  ///< per block
};

PagedAttnLayout make_paged_layout(const PagedAttnCase& c, std::mt19937_64& rng);

/// Tensors of one built case (valid after run_op).
struct PagedAttnOp {
  Tensor *q = nullptr, *k = nullptr, *v = nullptr, *pos = nullptr, *seq = nullptr, *table = nullptr;
};

/// Builds the attention op of the case over `layout` (q is a strided view, as in the models).
Tensor* build_paged_attention(Context& ctx, const PagedAttnCase& c, const PagedAttnLayout& layout, float scale,
                              PagedAttnOp& op, int32_t impl = 0);

/// Leaf data for the case: random q, K and V with unused blocks poisoned, and the layout's I32 inputs.
LeafData paged_leaf_data(const PagedAttnCase& c, const PagedAttnLayout& layout);
/// The init function of paged_leaf_data.
InitFn paged_init(const PagedAttnCase& c, const PagedAttnLayout& layout);

}  // namespace minfer::test
