// FlashAttention prefill probe (not part of the library build): times the library's mma.sync
// FlashAttention-2 prefill kernel (ops/cuda/k_attention_fa.cu, #included verbatim) with 8 and 4
// warps a block over paged f16 and q8_0 KV caches, and checks it against a float64 CPU reference
// (the WMMA kernel it replaced was timed beside it until it landed: figures in
// docs/perf/2026-12-03-attention-tensor-cores.md). Build here, run on the GPU machine:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -o /tmp/fa_probe scripts/probes/fa_probe.cu
//   /tmp/fa_probe [substring]    e.g. /tmp/fa_probe d32256   (matched against "shape kv case kernel")
// Prints one markdown row per shape x cache type x case x kernel: us per launch (median of graph
// replays of 20 launches), TFLOP/s (4 * D * n_head * the visible keys summed over the queries),
// the max abs error against the reference over sampled (query, head) rows and the max |ref|
// there; a FAIL line when the error exceeds 2e-2 * max |ref| or is NaN, or when a kernel reports
// an error (the block table's unused entries are -1: a kernel reading past a sequence trips it).
//
// Shapes: Qwen2.5-7B (28 query heads, 4 KV heads, head dim 128) and Llama-3.2-1B (32 / 8, head
// dim 64). The cache: 32768 cells in blocks of 256 tokens, K and V N(0, 1) (q8_0: quantized
// per 32 as ggml does), the block table a random permutation (blocks out of order); q N(0, 1.5^2)
// per element, scale 1/sqrt(D).
// Cases: T = 512 queries of one sequence at depth d in {0, 4096, 16384, 32256} (positions
// d..d+511), T = 8192 at depth 0, and `mixed`: 4 sequences in one batch of 1201 queries (200 at
// positions 0..199, 700 at 2300..2999, 1 at 5000, 300 at 8000..8299), whose query tiles straddle
// sequences.
// Kernels:
//   mma_w8    the library's launch_fa (8 warps x 16 queries a block, kFaWarps)
//   mma_w4    the same kernel with 4 warps (64 queries a block; two blocks per SM by registers)
#include "ops/cuda/k_attention_fa.cu"
#include "scripts/probes/library_stubs.h"
#include "scripts/probes/probe_util.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

// ------------------------------------------------------------------ host side
using minfer::DType;
using minfer::Tensor;

namespace {

using probe::f32_to_f16;
using probe::Rng;

float g_f16[65536];  // f16 bits -> value

constexpr int kBs = 256, kBlocks = 128, kCells = kBs * kBlocks, kRows = 4;  // cache: 32768 cells; table rows
constexpr int kLaunches = 20;                                               // per graph

struct Shape {
  const char* name;
  int n_head, n_head_kv, D;
};

struct Case {
  std::string name;
  std::vector<int32_t> pos, seq, table;  // table: [kRows][kBlocks]
};

// One sequence's queries at positions depth..depth+T-1; its blocks a random permutation.
Case one_seq(const std::string& name, int T, int depth, const std::vector<int32_t>& perm) {
  Case c;
  c.name = name;
  for (int t = 0; t < T; ++t) {
    c.pos.push_back(depth + t);
    c.seq.push_back(0);
  }
  c.table.assign(kRows * kBlocks, -1);
  const int used = (depth + T + kBs - 1) / kBs;
  for (int b = 0; b < used; ++b) c.table[b] = perm[b];
  return c;
}

// Four sequences in one batch, their blocks drawn from one permutation (no two share a block).
Case mixed(const std::vector<int32_t>& perm) {
  Case c;
  c.name = "mixed";
  struct Run {
    int seq, first, n;
  };
  const Run runs[] = {{1, 0, 200}, {0, 2300, 700}, {2, 5000, 1}, {3, 8000, 300}};
  int len[kRows] = {};
  for (const Run& r : runs) {
    for (int i = 0; i < r.n; ++i) {
      c.pos.push_back(r.first + i);
      c.seq.push_back(r.seq);
    }
    len[r.seq] = std::max(len[r.seq], r.first + r.n);
  }
  c.table.assign(kRows * kBlocks, -1);
  int next = 0;
  for (int s = 0; s < kRows; ++s)
    for (int b = 0; b < (len[s] + kBs - 1) / kBs; ++b) c.table[s * kBlocks + b] = perm[next++];
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : nullptr;
  for (uint32_t i = 0; i < 65536; ++i) {
    __half_raw r;
    r.x = static_cast<uint16_t>(i);
    g_f16[i] = __half2float(__half(r));
  }
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  minfer::cuda::DeviceError* derr;
  CK(cudaMalloc(&derr, sizeof(minfer::cuda::DeviceError)));
  CK(cudaMemset(derr, 0, sizeof(minfer::cuda::DeviceError)));
  minfer::cuda::KernelContext kc{};
  kc.stream = st;
  kc.prop = &prop;
  kc.err = derr;
  kc.node_index = 0;

  printf("# %s, %d SMs, L2 %d MB, %d-token blocks, %d cells\n", prop.name, prop.multiProcessorCount,
         prop.l2CacheSize >> 20, kBs, kCells);
  printf("| shape | kv | case | kernel | us | TFLOP/s | max abs err | max abs ref |\n|---|---|---|---|---|---|---|---|\n");
  int fails = 0;
  Rng rng{20261203};
  std::vector<int32_t> perm(kBlocks);
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = kBlocks - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  std::vector<Case> cases;
  for (int depth : {0, 4096, 16384, 32256}) cases.push_back(one_seq("t512_d" + std::to_string(depth), 512, depth, perm));
  cases.push_back(one_seq("t8192_d0", 8192, 0, perm));
  cases.push_back(mixed(perm));
  int Tmax = 0;
  for (const Case& c : cases) Tmax = std::max(Tmax, static_cast<int>(c.pos.size()));

  int32_t *dpos, *dseq, *dtable;
  CK(cudaMalloc(&dpos, Tmax * 4));
  CK(cudaMalloc(&dseq, Tmax * 4));
  CK(cudaMalloc(&dtable, kRows * kBlocks * 4));

  const Shape shapes[] = {{"qwen25_7b", 28, 4, 128}, {"llama32_1b", 32, 8, 64}};
  for (const Shape& sh : shapes) {
    const int D = sh.D, H = sh.n_head, HK = sh.n_head_kv, group = H / HK;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    // Values: K, V [cell][head][D], q [t][head][D].
    std::vector<float> kf(static_cast<size_t>(kCells) * HK * D), vf(kf.size()), qf(static_cast<size_t>(Tmax) * H * D);
    for (auto& x : kf) x = static_cast<float>(rng.normal());
    for (auto& x : vf) x = static_cast<float>(rng.normal());
    for (auto& x : qf) x = static_cast<float>(1.5 * rng.normal());
    float *dq, *dout;
    CK(cudaMalloc(&dq, qf.size() * 4));
    CK(cudaMalloc(&dout, qf.size() * 4));
    CK(cudaMemcpy(dq, qf.data(), qf.size() * 4, cudaMemcpyHostToDevice));

    for (const DType kv : {DType::F16, DType::Q8_0}) {
      const bool q8 = kv == DType::Q8_0;
      const size_t row = q8 ? static_cast<size_t>(D / 32) * 34 : static_cast<size_t>(D) * 2;
      const size_t nb2 = row * HK, bytes = nb2 * kCells;
      // Encode the caches; deq: the value each cache element holds.
      std::vector<uint8_t> hkc(bytes), hvc(bytes);
      auto encode = [&](const std::vector<float>& src, std::vector<uint8_t>& dst) {
        for (size_t r = 0; r < static_cast<size_t>(kCells) * HK; ++r) {
          const float* x = src.data() + r * D;
          uint8_t* o = dst.data() + r * row;
          if (!q8) {
            for (int e = 0; e < D; ++e) {
              const uint16_t h = f32_to_f16(x[e]);
              memcpy(o + 2 * e, &h, 2);
            }
            continue;
          }
          for (int b = 0; b < D / 32; ++b) {
            float amax = 0;
            for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
            const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
            const uint16_t dh = f32_to_f16(d);
            memcpy(o + 34 * b, &dh, 2);
            for (int i = 0; i < 32; ++i) {
              const int qv = std::clamp(static_cast<int>(std::lround(x[32 * b + i] * id)), -127, 127);
              o[34 * b + 2 + i] = static_cast<uint8_t>(static_cast<int8_t>(qv));
            }
          }
        }
      };
      encode(kf, hkc);
      encode(vf, hvc);
      // The values the caches hold, [cell][head][D] (q8_0: q * d, exact in f32).
      auto decode = [&](const std::vector<uint8_t>& c) {
        std::vector<float> y(static_cast<size_t>(kCells) * HK * D);
        for (size_t r = 0; r < static_cast<size_t>(kCells) * HK; ++r) {
          const uint8_t* x = c.data() + r * row;
          for (int e = 0; e < D; ++e) {
            uint16_t h;
            if (!q8) {
              memcpy(&h, x + 2 * e, 2);
              y[r * D + e] = g_f16[h];
            } else {
              memcpy(&h, x + 34 * (e / 32), 2);
              y[r * D + e] = g_f16[h] * static_cast<float>(static_cast<int8_t>(x[34 * (e / 32) + 2 + e % 32]));
            }
          }
        }
        return y;
      };
      const std::vector<float> kd = decode(hkc), vd = decode(hvc);
      uint8_t *dk, *dv;
      CK(cudaMalloc(&dk, bytes));
      CK(cudaMalloc(&dv, bytes));
      CK(cudaMemcpy(dk, hkc.data(), bytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dv, hvc.data(), bytes, cudaMemcpyHostToDevice));
      Tensor K, V;
      K.type = V.type = kv;
      K.ne = V.ne = {D, HK, kCells, 1};
      K.nb = V.nb = {q8 ? size_t{34} : size_t{2}, row, nb2, nb2 * kCells};
      K.data = dk;
      V.data = dv;

      for (const Case& c : cases) {
        const int T = static_cast<int>(c.pos.size());
        CK(cudaMemcpy(dpos, c.pos.data(), T * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dseq, c.seq.data(), T * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dtable, c.table.data(), c.table.size() * 4, cudaMemcpyHostToDevice));
        minfer::cuda::Paged pk;
        pk.pos = dpos;
        pk.seq = dseq;
        pk.table = dtable;
        pk.max_blocks = kBlocks;
        pk.n_rows = kRows;
        pk.n_blocks = kBlocks;
        pk.bs_log2 = 8;
        Tensor Q;
        Q.type = DType::F32;
        Q.ne = {D, H, T, 1};
        Q.nb = {4, static_cast<size_t>(D) * 4, static_cast<size_t>(D) * H * 4, static_cast<size_t>(D) * H * T * 4};
        Q.data = dq;
        double keys = 0;
        for (int t = 0; t < T; ++t) keys += c.pos[t] + 1.0;
        const double flops = 4.0 * D * H * keys;

        // Reference rows: tile edges, both ends, every sequence's first query, random.
        std::vector<int> ts = {0, 1, 63, 64, 65, 127, 128, 129, T / 2, T - 2, T - 1};
        for (int t = 1; t < T; ++t)
          if (c.seq[t] != c.seq[t - 1]) ts.push_back(t);
        while (ts.size() < 24) ts.push_back(static_cast<int>(rng.next() % T));
        std::vector<std::pair<int, int>> rows;
        for (int t : ts)
          if (t >= 0 && t < T) {
            rows.push_back({t, static_cast<int>(rng.next() % H)});
            rows.push_back({t, t == 0 ? 0 : t == T - 1 ? H - 1 : static_cast<int>(rng.next() % H)});
          }
        std::vector<std::vector<double>> ref(rows.size(), std::vector<double>(D));
        double ref_max = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
          const int t = rows[i].first, h = rows[i].second, hk = h / group, p = c.pos[t], s = c.seq[t];
          const float* qv = qf.data() + (static_cast<size_t>(t) * H + h) * D;
          std::vector<double> sc(p + 1);
          double mx = -1e300;
          for (int j = 0; j <= p; ++j) {
            const int64_t cell = static_cast<int64_t>(c.table[s * kBlocks + j / kBs]) * kBs + j % kBs;
            const float* kr = kd.data() + (static_cast<size_t>(cell) * HK + hk) * D;
            double a = 0;
            for (int e = 0; e < D; ++e) a += static_cast<double>(qv[e]) * kr[e];
            sc[j] = a * scale;
            mx = std::max(mx, sc[j]);
          }
          double sum = 0;
          for (auto& x : sc) sum += (x = std::exp(x - mx));
          for (int j = 0; j <= p; ++j) {
            const int64_t cell = static_cast<int64_t>(c.table[s * kBlocks + j / kBs]) * kBs + j % kBs;
            const double w = sc[j] / sum;
            const float* vr = vd.data() + (static_cast<size_t>(cell) * HK + hk) * D;
            for (int e = 0; e < D; ++e) ref[i][e] += w * vr[e];
          }
          for (double x : ref[i]) ref_max = std::max(ref_max, std::fabs(x));
        }

        auto bench = [&](const char* kname, const std::function<void()>& launch) {
          const std::string key = std::string(sh.name) + " " + (q8 ? "q8_0" : "f16") + " " + c.name + " " + kname;
          if (filter && !strstr(key.c_str(), filter)) return;
          CK(cudaMemsetAsync(dout, 0xFF, static_cast<size_t>(T) * H * D * 4, st));  // NaN: unwritten rows fail
          launch();
          CK(cudaStreamSynchronize(st));
          minfer::cuda::DeviceError rec;
          CK(cudaMemcpy(&rec, derr, sizeof(rec), cudaMemcpyDeviceToHost));
          if (rec.code != 0) {
            printf("FAIL %s: the kernel reported error %d (value %lld, limit %lld)\n", key.c_str(), rec.code,
                   static_cast<long long>(rec.value), static_cast<long long>(rec.limit));
            ++fails;
            CK(cudaMemset(derr, 0, sizeof(rec)));
          }
          std::vector<float> out(static_cast<size_t>(T) * H * D);
          CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
          double err = 0;
          for (size_t i = 0; i < rows.size(); ++i) {
            const float* o = out.data() + (static_cast<size_t>(rows[i].first) * H + rows[i].second) * D;
            for (int e = 0; e < D; ++e) {
              const double d = std::fabs(o[e] - ref[i][e]);
              err = std::isnan(d) ? NAN : std::max(err, d);
              if (std::isnan(err)) break;
            }
            if (std::isnan(err)) break;
          }
          const double us = probe::graph_us(st, kLaunches, 5, [&](int) { launch(); });
          printf("| %s | %s | %s | %s | %.1f | %.1f | %.3e | %.3e |\n", sh.name, q8 ? "q8_0" : "f16", c.name.c_str(), kname,
                 us, flops / us / 1e6, err, ref_max);
          if (!(err <= 2e-2 * ref_max)) {
            printf("FAIL %s: max abs err %.3e > 2e-2 * max |ref| %.3e\n", key.c_str(), err, ref_max);
            ++fails;
          }
          fflush(stdout);
        };

        bench("mma_w8", [&] {
          if (!minfer::cuda::launch_fa(kc, Q, K, V, pk, scale, group, dout)) {
            fprintf(stderr, "launch_fa refused the node\n");
            exit(1);
          }
        });
        bench("mma_w4", [&] {
          if (D == 64) minfer::cuda::fa_dispatch<64, 4>(kc, Q, K, V, pk, scale, group, dout);
          else minfer::cuda::fa_dispatch<128, 4>(kc, Q, K, V, pk, scale, group, dout);
        });
      }
      CK(cudaFree(dk));
      CK(cudaFree(dv));
    }
    CK(cudaFree(dq));
    CK(cudaFree(dout));
  }
  printf("%s: %d failures\n", fails ? "FAILED" : "ok", fails);
  return fails ? 1 : 0;
}
