// KV_STORE and ATTENTION on the CPU.
//
// Attention works per (KV head, chunk of up to 16 queries of one sequence): the visible K and V
// rows of that sequence and KV head are gathered through the block table and widened to f32 once,
// then every query head of the group attends over them, either naively (full score row, softmax,
// weighted sum) or blocked (flash-style online softmax over KV blocks). Each query walks its keys
// 0..pos in the same order whatever the chunk holds, so results do not depend on the batch.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention.h"
#include "ops/cpu/kernels.h"
#include "tensor/quants.h"

namespace minfer::cpu {
namespace {

constexpr int64_t kQueryChunk = 16;
constexpr int64_t kKvBlock = 64;

// Rows 0..n-1 of one sequence and KV head, through its block-table row, widened to f32.
void widen_rows(const Tensor& t, int64_t head, const int32_t* blocks, int64_t block_size, int64_t n,
                std::vector<float>& out) {
  const int64_t d = t.ne[0];
  out.resize(static_cast<size_t>(n * d));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t cell = static_cast<int64_t>(blocks[j / block_size]) * block_size + j % block_size;
    dequantize_row(t.type, row_ptr(t, head, cell, 0), out.data() + j * d, d);
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void attend_naive(const float* q, const float* K, const float* V, int64_t n_vis, int64_t d, int64_t dv, float scale,
                  float* out, std::vector<float>& scores) {
  scores.resize(static_cast<size_t>(n_vis));
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n_vis; ++j) {
    scores[static_cast<size_t>(j)] = scale * dot(q, K + j * d, d);
    mx = std::max(mx, scores[static_cast<size_t>(j)]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n_vis; ++j) {
    scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - mx);
    sum += scores[static_cast<size_t>(j)];
  }
  for (int64_t i = 0; i < dv; ++i) out[i] = 0.0f;
  for (int64_t j = 0; j < n_vis; ++j) {
    const float p = scores[static_cast<size_t>(j)] / sum;
    const float* v = V + j * dv;
    for (int64_t i = 0; i < dv; ++i) out[i] += p * v[i];
  }
}

void attend_blocked(const float* q, const float* K, const float* V, int64_t n_vis, int64_t d, int64_t dv,
                    float scale, float* out, std::vector<float>& acc) {
  acc.assign(static_cast<size_t>(dv), 0.0f);
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  float s[kKvBlock];
  for (int64_t j0 = 0; j0 < n_vis; j0 += kKvBlock) {
    const int64_t jn = std::min(kKvBlock, n_vis - j0);
    float bm = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < jn; ++j) {
      s[j] = scale * dot(q, K + (j0 + j) * d, d);
      bm = std::max(bm, s[j]);
    }
    const float m_new = std::max(m, bm);
    const float corr = std::exp(m - m_new);  // 0 on the first block (m = -inf)
    l *= corr;
    for (int64_t i = 0; i < dv; ++i) acc[static_cast<size_t>(i)] *= corr;
    for (int64_t j = 0; j < jn; ++j) {
      const float p = std::exp(s[j] - m_new);
      l += p;
      const float* v = V + (j0 + j) * dv;
      for (int64_t i = 0; i < dv; ++i) acc[static_cast<size_t>(i)] += p * v[i];
    }
    m = m_new;
  }
  const float inv = 1.0f / l;
  for (int64_t i = 0; i < dv; ++i) out[i] = acc[static_cast<size_t>(i)] * inv;
}

}  // namespace

void k_kv_store(KernelContext& kc, Tensor& dst) {
  Tensor& cache = *dst.src[0];
  const Tensor& x = *dst.src[1];
  const std::vector<int32_t> cells = read_i32(*dst.src[2]);
  const int64_t n_cells = cache.ne[2], d = x.ne[0];
  for (int32_t c : cells)
    if (c < 0 || c >= n_cells)
      throw OpError(fmt::format("KV_STORE: cell {} outside the cache's [0, {}) ({})", c, n_cells, describe(cache)));
  kc.pool.parallel_for(x.ne[1] * x.ne[2], 8, [&](int64_t lo, int64_t hi) {
    std::vector<float> tmp(static_cast<size_t>(d));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t h = r % x.ne[1], t = r / x.ne[1];
      const char* in = row_ptr(x, h, t, 0);
      for (int64_t i = 0; i < d; ++i) tmp[static_cast<size_t>(i)] = load_f(x, in, i);
      char* out = row_ptr(cache, h, cells[static_cast<size_t>(t)], 0);
      if (cache.type == DType::Q8_0)
        quantize_row_activations(DType::Q8_0, tmp.data(), out, d);
      else
        quantize_row(cache.type, tmp.data(), out, d);
    }
  });
}

void k_attention(KernelContext& kc, Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const std::vector<int32_t> pos = read_i32(*dst.src[3]);
  const std::vector<int32_t> seq = read_i32(*dst.src[4]);
  const Tensor& table = *dst.src[5];
  const float scale = dst.param<float>(0);
  const auto impl = static_cast<ops::AttentionImpl>(dst.param<int32_t>(1));
  const int64_t block_size = dst.param<int32_t>(2);
  const int64_t d = q.ne[0], dv = v.ne[0], n_head = q.ne[1], n_head_kv = k.ne[1], T = q.ne[2];
  const int64_t group = n_head / n_head_kv, max_blocks = table.ne[0], n_rows = table.ne[1];
  const int64_t n_blocks = k.ne[2] / block_size;
  const auto* tab = static_cast<const int32_t*>(table.data);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t p = pos[static_cast<size_t>(t)], s = seq[static_cast<size_t>(t)];
    if (p < 0 || p >= max_blocks * block_size)
      throw OpError(fmt::format("ATTENTION: position {} outside the block table's {} positions ({})", p,
                                max_blocks * block_size, describe(table)));
    if (s < 0 || s >= n_rows)
      throw OpError(fmt::format("ATTENTION: sequence {} outside the block table's {} rows", s, n_rows));
    for (int64_t b = 0; b <= p / block_size; ++b)
      if (const int32_t blk = tab[s * max_blocks + b]; blk < 0 || blk >= n_blocks)
        throw OpError(fmt::format("ATTENTION: block table row {} names block {} outside the cache's {} blocks", s, blk,
                                  n_blocks));
  }
  // Chunks of at most kQueryChunk consecutive queries of one sequence.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t t0 = 0; t0 < T;) {
    int64_t t1 = t0 + 1;
    while (t1 < T && t1 - t0 < kQueryChunk && seq[static_cast<size_t>(t1)] == seq[static_cast<size_t>(t0)]) ++t1;
    chunks.emplace_back(t0, t1);
    t0 = t1;
  }
  const bool blocked = impl != ops::AttentionImpl::NAIVE;
  const auto n_chunks = static_cast<int64_t>(chunks.size());
  kc.pool.parallel_for(n_head_kv * n_chunks, 1, [&](int64_t lo, int64_t hi) {
    // Per-thread buffers that outlive the call: K/V widened for a long past are hundreds of KiB,
    // and allocating them per call made glibc map, zero and unmap fresh pages every token.
    thread_local std::vector<float> K, V, qv, scratch;
    qv.resize(static_cast<size_t>(d));
    for (int64_t job = lo; job < hi; ++job) {
      const int64_t hkv = job % n_head_kv;
      const auto [t0, t1] = chunks[static_cast<size_t>(job / n_head_kv)];
      const int32_t* blocks = tab + seq[static_cast<size_t>(t0)] * max_blocks;
      int64_t n_vis_max = 0;
      for (int64_t t = t0; t < t1; ++t) n_vis_max = std::max<int64_t>(n_vis_max, pos[static_cast<size_t>(t)] + 1);
      widen_rows(k, hkv, blocks, block_size, n_vis_max, K);
      widen_rows(v, hkv, blocks, block_size, n_vis_max, V);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n_vis = pos[static_cast<size_t>(t)] + 1;
        for (int64_t g = 0; g < group; ++g) {
          const int64_t h = hkv * group + g;
          const char* qr = row_ptr(q, h, t, 0);
          for (int64_t i = 0; i < d; ++i) qv[static_cast<size_t>(i)] = load_f(q, qr, i);
          float* out = reinterpret_cast<float*>(row_ptr(dst, h, t, 0));
          if (blocked)
            attend_blocked(qv.data(), K.data(), V.data(), n_vis, d, dv, scale, out, scratch);
          else
            attend_naive(qv.data(), K.data(), V.data(), n_vis, d, dv, scale, out, scratch);
        }
      }
    }
  });
}

}  // namespace minfer::cpu
