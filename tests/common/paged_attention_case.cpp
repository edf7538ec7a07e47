#include "common/paged_attention_case.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "common/test_util.h"
#include "ops/attention.h"
#include "tensor/fp16.h"

namespace minfer::test {

PagedAttnLayout make_paged_layout(const PagedAttnCase& c, std::mt19937_64& rng) {
  const auto n_seq = static_cast<int32_t>(c.seq_len.size());
  if (n_seq == 0 || c.n_query.size() != c.seq_len.size()) throw std::invalid_argument("paged case: bad sequences");
  const int32_t bs = c.block_size;
  PagedAttnLayout L;
  int32_t need = 0;
  const int32_t nb0 = (c.seq_len[0] + bs - 1) / bs;
  for (int32_t s = 0; s < n_seq; ++s) {
    const int32_t nb = (c.seq_len[static_cast<size_t>(s)] + bs - 1) / bs;
    L.max_blocks = std::max(L.max_blocks, nb);
    // A later sequence shares only the blocks sequence 0 has (the loop below): the rest are its own.
    need += s == 0 ? nb : nb - std::min({c.shared_blocks, nb, nb0});
  }
  L.n_blocks = need + c.spare_blocks;
  std::vector<int32_t> ids(static_cast<size_t>(L.n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  L.table.assign(static_cast<size_t>(L.max_blocks) * static_cast<size_t>(n_seq), -1);  // never read
  L.used.assign(static_cast<size_t>(L.n_blocks), 0);
  size_t next = 0;
  for (int32_t s = 0; s < n_seq; ++s) {
    const int32_t nb = (c.seq_len[static_cast<size_t>(s)] + bs - 1) / bs;
    for (int32_t b = 0; b < nb; ++b) {
      const bool shared = s > 0 && b < c.shared_blocks && b < (c.seq_len[0] + bs - 1) / bs;
      const int32_t blk = shared ? L.table[static_cast<size_t>(b)] : ids[next++];
      L.table[static_cast<size_t>(s) * static_cast<size_t>(L.max_blocks) + static_cast<size_t>(b)] = blk;
      L.used[static_cast<size_t>(blk)] = 1;
    }
  }
  std::vector<std::pair<int32_t, int32_t>> q;  // (seq, pos)
  for (int32_t s = 0; s < n_seq; ++s)
    for (int32_t i = 0; i < c.n_query[static_cast<size_t>(s)]; ++i)
      q.emplace_back(s, c.seq_len[static_cast<size_t>(s)] - c.n_query[static_cast<size_t>(s)] + i);
  if (c.interleave) std::shuffle(q.begin(), q.end(), rng);
  for (auto [s, p] : q) {
    L.seq.push_back(s);
    L.pos.push_back(p);
  }
  return L;
}

Tensor* build_paged_attention(Context& ctx, const PagedAttnCase& c, const PagedAttnLayout& L, float scale,
                              PagedAttnOp& op, int32_t impl) {
  const auto T = static_cast<int64_t>(L.pos.size());
  const int64_t cells = static_cast<int64_t>(L.n_blocks) * c.block_size;
  Tensor* qbase = ctx.new_tensor(DType::F32, {c.d * (c.n_head + 1), T}, "qbase");
  op.q = view(ctx, qbase, {c.d, c.n_head, T}, {static_cast<size_t>(c.d) * 4, qbase->nb[1]}, 0);
  op.k = ctx.new_tensor(c.kv_type, {c.d, c.n_head_kv, cells}, "k");
  op.v = ctx.new_tensor(c.kv_type, {c.dv, c.n_head_kv, cells}, "v");
  op.pos = ctx.new_tensor(DType::I32, {T}, "pos");
  op.seq = ctx.new_tensor(DType::I32, {T}, "seq");
  op.table = ctx.new_tensor(DType::I32, {L.max_blocks, static_cast<int64_t>(c.seq_len.size())}, "table");
  return ops::attention(ctx, op.q, op.k, op.v, op.pos, op.seq, op.table, c.block_size, scale,
                        static_cast<ops::AttentionImpl>(impl));
}

LeafData paged_leaf_data(const PagedAttnCase& c, const PagedAttnLayout& L) { return LeafData(paged_init(c, L)); }

InitFn paged_init(const PagedAttnCase& c, const PagedAttnLayout& L) {
  return [c, L](Tensor& leaf) {
    auto put = [&leaf](const std::vector<int32_t>& v) { std::copy(v.begin(), v.end(), static_cast<int32_t*>(leaf.data)); };
    if (leaf.name == "pos") return put(L.pos);
    if (leaf.name == "seq") return put(L.seq);
    if (leaf.name == "table") return put(L.table);
    fill_random(leaf);
    if (leaf.name != "k" && leaf.name != "v") return;
    // Poison every row of the blocks no sequence uses.
    const size_t row = leaf.nb[2];
    for (int32_t b = 0; b < L.n_blocks; ++b) {
      if (L.used[static_cast<size_t>(b)]) continue;
      for (int64_t cell = static_cast<int64_t>(b) * c.block_size; cell < static_cast<int64_t>(b + 1) * c.block_size; ++cell) {
        char* p = static_cast<char*>(leaf.data) + static_cast<size_t>(cell) * row;
        if (leaf.type == DType::F32) {
          std::fill_n(reinterpret_cast<float*>(p), row / 4, std::numeric_limits<float>::quiet_NaN());
        } else if (leaf.type == DType::F16) {
          std::fill_n(reinterpret_cast<uint16_t*>(p), row / 2, uint16_t{0x7e00});
        } else {  // q8_0 blocks of 34 bytes: a NaN scale
          for (size_t off = 0; off + 34 <= row; off += 34) *reinterpret_cast<uint16_t*>(p + off) = 0x7e00;
        }
      }
    }
  };
}

}  // namespace minfer::test
