// Batch invariance on CUDA: a row computed in a batch of T rows has exactly the bits it has when
// computed alone. Speculative decoding's greedy identity rests on it (the target verifies d + 1
// tokens in one pass, plain decoding evaluates them one at a time) and so does continuous
// batching's (a sequence decoded beside others gives what it gives alone), for the decode-size
// kernels: split-KV attention up to kDecodeMaxRows = 64 queries; the dp4a MMVQ up to kMmvqRows = 8
// rows (16 for Q2_K/Q3_K, which have no MMQ) and the tensor-core MMQ from 9 to 64 rows (its int8
// kernel, or the f16 one for big Q4_K/Q6_K weights), each within its range; the float matvec up to 16.
//
// Inputs are generated per logical element (global row index, element index), so the T-row
// graph and each one-row graph see the same values without sharing buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

// Deterministic N(0, sd) values for row `row` of a stream: the same for every graph that holds
// that row (one generator per row, seeded by (stream, row)).
void row_values(uint64_t stream, int64_t row, float sd, std::vector<float>& out) {
  std::mt19937_64 g(stream * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(row) * 0xBF58476D1CE4E5B9ull);
  std::normal_distribution<float> nd(0.0f, sd);
  for (auto& x : out) x = nd(g);
}

// Fills leaf rows [row0, row0 + nrows) of the stream named by the leaf (its first letter).
void fill_rows(Tensor& leaf, int64_t row0, float sd) {
  const uint64_t stream = seed() ^ static_cast<uint64_t>(leaf.name[0]);
  const int64_t k = leaf.ne[0];
  std::vector<float> v(static_cast<size_t>(k));
  for (int64_t r = 0; r < leaf.nrows(); ++r) {
    row_values(stream, row0 + r, sd, v);
    quantize_row(leaf.type, v.data(), static_cast<char*>(leaf.data) + r * leaf.row_size(), k);
  }
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Row t of a batch of N against row t computed in a batch of `ref` rows starting at t (ref = 1:
// alone; the MMQ range starts at 9 rows, so its rows are compared with batches of 9).
void check_matmul_rows(DType wt, int64_t K, int64_t M, int64_t N, int64_t ref = 1) {
  // x rows [t0, t0 + n): the activations; w: the same weight in every graph.
  auto run = [&](int64_t t0, int64_t n) {
    LeafData data([&](Tensor& leaf) { fill_rows(leaf, leaf.name == "w" ? 0 : t0, leaf.name == "w" ? 0.05f : 1.0f); });
    return run_op(*gpu(), [&](Context& c) {
      return ops::mul_mat(c, c.new_tensor(wt, {K, M}, "w"), c.new_tensor(DType::F32, {K, n}, "x"));
    }, data).values;
  };
  const auto batch = run(0, N);
  ASSERT_EQ(batch.size(), static_cast<size_t>(M * N));
  for (float f : batch) ASSERT_TRUE(std::isfinite(f));
  for (int64_t t = 0; t < N; ++t) {
    const auto one = run(t, ref);
    EXPECT_TRUE(same_bits(batch.data() + t * M, one.data(), static_cast<size_t>(M)))
        << "mul_mat " << dtype_name(wt) << " K=" << K << " M=" << M << ": row " << t << " of a batch of " << N
        << " differs from the row computed in a batch of " << ref;
  }
}

TEST(CudaBatchInvariance, MatmulRowsOfADecodeBatchEqualSingleRows) {
  MINFER_REQUIRE_GPU();
  for (DType wt : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (int64_t N : {2, 5, 8}) check_matmul_rows(wt, 1024, 300, N);              // MMVQ
    for (int64_t N : {16, 33, 64}) check_matmul_rows(wt, 1024, 300, N, 9);        // MMQ
  }
  for (DType wt : {DType::Q2_K, DType::Q3_K, DType::F16, DType::F32})
    for (int64_t N : {2, 5, 8, 16}) check_matmul_rows(wt, 512, 300, N);  // MMVQ only, float matvec
  check_matmul_rows(DType::Q4_K, 3584, 512, 16, 9);  // MMQ with K split over several blocks
  // Q4_K / Q6_K weights MMQ runs on its f16 kernel (K >= 8192 or M >= 16384, k_mmq.cu): K split
  // over 16 blocks, M not a multiple of 64, every tile width against the 16-column tile of the
  // 9-row reference (N = 16: 16 columns, 17: 32, 33 and 64: 64); and an unsplit tall weight.
  // M = 100 keeps the host's weight quantization (once per run, N + 1 runs) to seconds.
  for (DType wt : {DType::Q4_K, DType::Q6_K}) {
    for (int64_t N : {16, 17, 33, 64}) check_matmul_rows(wt, 8192, 100, N, 9);
    check_matmul_rows(wt, 256, 16400, 16, 9);
  }
  // Q4_K with M >= 16384 (a gate|up projection) and Q6_K with K >= 8192 or M >= 16384 (an
  // ffn_down, an LM head) run the f16 kernel at every N (mmq_f16_every_row): a row of any batch
  // equals the row alone.
  for (int64_t N : {2, 5, 8, 16}) {
    check_matmul_rows(DType::Q4_K, 256, 16400, N);
    check_matmul_rows(DType::Q6_K, 8192, 100, N);
    check_matmul_rows(DType::Q6_K, 256, 16400, N);
  }
}

struct AttnShape {
  int64_t d, n_head, n_head_kv, n_kv, past, T;
  DType kv;
};

void check_attention_rows(const AttnShape& s) {
  auto run = [&](int64_t t0, int64_t n) {
    LeafData data([&](Tensor& leaf) {
      if (leaf.type == DType::I32) {  // one sequence in consecutive blocks of 16
        auto* out = static_cast<int32_t*>(leaf.data);
        for (int64_t i = 0; i < leaf.nelements(); ++i)
          out[i] = leaf.name == "pos" ? static_cast<int32_t>(s.past + t0 + i) : leaf.name == "seq" ? 0 : static_cast<int32_t>(i);
        return;
      }
      // q: rows are (head, token); keep the token index global so row t0 + i means the same query.
      if (leaf.name == "q") {
        const uint64_t stream = seed() ^ 'q';
        std::vector<float> v(static_cast<size_t>(s.d));
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < s.n_head; ++h) {
            row_values(stream, (t0 + t) * s.n_head + h, 1.0f, v);
            std::memcpy(static_cast<float*>(leaf.data) + (t * s.n_head + h) * s.d, v.data(), v.size() * 4);
          }
        return;
      }
      fill_rows(leaf, 0, 1.0f);
    });
    return run_op(*gpu(), [&](Context& c) {
      Tensor* q = c.new_tensor(DType::F32, {s.d, s.n_head, n}, "q");
      Tensor* k = c.new_tensor(s.kv, {s.d, s.n_head_kv, s.n_kv}, "k");
      Tensor* v = c.new_tensor(s.kv, {s.d, s.n_head_kv, s.n_kv}, "v");
      return ops::attention(c, q, k, v, c.new_tensor(DType::I32, {n}, "pos"), c.new_tensor(DType::I32, {n}, "seq"),
                            c.new_tensor(DType::I32, {s.n_kv / 16, 1}, "table"), 16,
                            1.0f / std::sqrt(static_cast<float>(s.d)));
    }, data).values;
  };
  const auto batch = run(0, s.T);
  const size_t row = static_cast<size_t>(s.d * s.n_head);
  ASSERT_EQ(batch.size(), row * static_cast<size_t>(s.T));
  for (float f : batch) ASSERT_TRUE(std::isfinite(f));
  for (int64_t t = 0; t < s.T; ++t) {
    const auto one = run(t, 1);
    EXPECT_TRUE(same_bits(batch.data() + t * row, one.data(), row))
        << "attention d=" << s.d << " heads " << s.n_head << "/" << s.n_head_kv << " n_kv=" << s.n_kv << " kv "
        << dtype_name(s.kv) << ": query " << t << " (pos " << s.past + t << ") of a batch of " << s.T
        << " differs from the query computed alone";
  }
}

TEST(CudaBatchInvariance, AttentionQueriesOfAVerifyBatchEqualSingleQueries) {
  MINFER_REQUIRE_GPU();
  for (DType kv : {DType::F16, DType::Q8_0}) {
    check_attention_rows({64, 4, 2, 256, 100, 16, kv});      // fixture-like: tensor-core kernel, few splits
    check_attention_rows({128, 28, 4, 4608, 4000, 8, kv});   // Qwen2.5-7B at depth: many splits, 4 KV heads a block
    check_attention_rows({128, 32, 8, 1024, 700, 3, kv});    // Qwen3-8B shape, T = 3
    check_attention_rows({64, 16, 1, 512, 300, 5, kv});      // group 16: every row of the m16 tile
    check_attention_rows({128, 28, 4, 1024, 500, 64, kv});   // 64 sequences' decode rows
    check_attention_rows({256, 8, 2, 512, 200, 4, kv});      // head dim 256: the SIMT GQA kernel
    check_attention_rows({96, 4, 4, 256, 120, 6, kv});       // head dim 96: the per-head split kernel
  }
}

}  // namespace
}  // namespace minfer::test
