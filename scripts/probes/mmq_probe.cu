// Decode-MMQ probe (not part of the library build): times the library's decode matmuls on the
// Qwen2.5-7B decode shapes — the dp4a MMVQ for 1..8 activation rows (ops/cuda/k_mmvq.cu), the
// int8 tensor-core MMQ for 9..64 (ops/cuda/k_mmq.cu) and the f16 one for big Q4_K / Q6_K weights
// at every N (ops/cuda/k_mmq_f16.cu) — and checks their outputs against a float64 CPU
// reference. Build here, run on the GPU machine:
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -I. -o /tmp/mmq_probe scripts/probes/mmq_probe.cu ops/cuda/k_mmq_f16.cu ops/cuda/k_mmvq.cu
//   /tmp/mmq_probe [shape-substring [kernel-substring]]      e.g. /tmp/mmq_probe q4k_down mmvq
// Prints one markdown row per shape x kernel x N: us per launch (median of graph replays), GB/s of
// weight bytes, max |err| / max |ref| over sampled outputs; a FAIL line when that exceeds 1e-2.
//
// Kernels
//   read   every weight byte once (16-byte loads, grid-stride): the streaming ceiling
//   mmvq   mmvq() of k_mmvq.cu (a third translation unit) at N <= kMatvecMaxRows: the library's
//          routing, so above kMmvqRows the MMQ for these types unless a probe build of k_mmvq.cu
//          drops that routing (docs/perf/2026-12-06-mmvq-rows.md)
//   int8   k_mmq.cu's mmq_kernel (the file is #included verbatim, launched through launch_t with
//          its K split and mmq_reduce as k_splits() picks them)
//   f16    mmq_f16() of k_mmq_f16.cu (a second translation unit), as mmq() runs it for these
//          weights; its design is described in that file
// KernelContext::where / check_launch come from library_stubs.h and dtype_traits is stubbed below (they live in .cpp
// files of the library). The f16 kernel's earlier variants (4 stages, 8 warps, twice the K
// splits) and their figures: docs/perf/2026-12-03-mmq-f16-probe.md.
#include "ops/cuda/k_mmq.cu"
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
#include <string>
#include <type_traits>
#include <vector>


// ------------------------------------------------------------------ stubs for k_mmq.cu
// Out-of-line library functions k_mmq.cu refers to (error paths only): defined here so the probe
// links without the library.
namespace minfer {
const DTypeTraits& dtype_traits(DType t) {
  static DTypeTraits tr{};
  tr.type = t;
  tr.name = "?";
  return tr;
}
namespace cuda {
}  // namespace cuda
}  // namespace minfer

// ------------------------------------------------------------------ read ceiling
__global__ void read_kernel(const int4* __restrict__ w, int64_t n16, float* out) {
  int acc = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n16; i += (int64_t)gridDim.x * blockDim.x) {
    const int4 v = __ldg(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) out[0] = 1.0f;
}

// ------------------------------------------------------------------ host
using probe::Rng;
using probe::deq_row;
using probe::f32_to_f16;

struct Shape {
  const char* name;
  int type;  // 0 = Q4_K, 1 = Q6_K
  int K, M;
};

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : nullptr;
  const char* kfilter = argc > 2 ? argv[2] : nullptr;
  constexpr int NMAX = 64;
  const int Ns[] = {1, 2, 4, 8, 9, 16, 32, 64};
  const std::vector<Shape> shapes = {
      {"q4k_gate_up_3584x37888", 0, 3584, 37888}, {"q4k_qkv_3584x4608", 0, 3584, 4608},
      {"q4k_wo_3584x3584", 0, 3584, 3584},        {"q4k_down_18944x3584", 0, 18944, 3584},
      {"q6k_down_18944x3584", 1, 18944, 3584},    {"q6k_lm_head_3584x152064", 1, 3584, 152064},
  };
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  const int sms = prop.multiProcessorCount;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* dscratch;
  CK(cudaMalloc(&dscratch, 16));

  minfer::cuda::KernelContext kc{};
  kc.stream = st;
  kc.prop = &prop;

  printf("# %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  printf("| shape | kernel | N | splits | us | GB/s | max rel err |\n|---|---|---|---|---|---|---|\n");
  int fails = 0;
  Rng rng{12345};
  for (const Shape& sh : shapes) {
    if (filter && !strstr(sh.name, filter)) continue;
    const int BB = sh.type == 0 ? 144 : 210, nblk = sh.K / 256, U = sh.K / 32;
    const int64_t nb1 = static_cast<int64_t>(nblk) * BB, wbytes = nb1 * sh.M;
    // Enough copies that one graph's launches stream > 3x the 60 MB L2 (the LM head needs one).
    const int copies = static_cast<int>(std::max<int64_t>(1, (192LL << 20) / wbytes + 1));
    const int reps = static_cast<int>(std::clamp<int64_t>((1536LL << 20) / wbytes, 8, 200));

    // Weights: random quant bytes, sane positive f16 scales (Q6_K's int8 sub-scales are random bytes).
    std::vector<uint8_t> hw(wbytes);
    for (int64_t i = 0; i + 8 <= wbytes; i += 8) {
      const uint64_t v = rng.next();
      memcpy(hw.data() + i, &v, 8);
    }
    for (int64_t blk = 0; blk < static_cast<int64_t>(nblk) * sh.M; ++blk) {
      uint8_t* x = hw.data() + blk * BB;
      const uint16_t d = f32_to_f16(static_cast<float>(1e-3 + 9e-3 * rng.uniform()));
      const uint16_t dm = f32_to_f16(static_cast<float>(1e-3 + 9e-3 * rng.uniform()));
      if (sh.type == 0) {
        memcpy(x, &d, 2);
        memcpy(x + 2, &dm, 2);
      } else {
        memcpy(x + 208, &d, 2);
      }
    }
    uint8_t* dw;
    // +256: Q6_K chunks are staged from the 16-byte boundary below them and widened to 14 pieces,
    // which may read up to 14 bytes past the last row (base reads up to 15).
    CK(cudaMalloc(&dw, wbytes * copies + 256));
    for (int c = 0; c < copies; ++c) CK(cudaMemcpy(dw + wbytes * c, hw.data(), wbytes, cudaMemcpyHostToDevice));
    if (sh.type == 0 && (nb1 % 16 != 0 || reinterpret_cast<uintptr_t>(dw) % 16 != 0)) {
      fprintf(stderr, "f16 Q4_K kernels need 16-byte aligned rows\n");
      return 1;
    }

    // Activations: N(0, 1) plus a per-channel offset (real hidden states are not zero-mean: this
    // exercises the min / offset terms) and rare outliers, quantized to q8_1 planes on the host.
    std::vector<double> bias(sh.K);
    for (auto& b : bias) b = 0.5 * rng.normal();
    std::vector<int8_t> hq(static_cast<size_t>(NMAX) * sh.K);
    std::vector<float2> hd(static_cast<size_t>(NMAX) * U);
    for (int n = 0; n < NMAX; ++n)
      for (int u = 0; u < U; ++u) {
        float x[32], amax = 0;
        for (int i = 0; i < 32; ++i) {
          double v = rng.normal() + bias[32 * u + i];
          if (rng.uniform() < 1e-3) v *= 20.0;
          x[i] = static_cast<float>(v);
          amax = std::max(amax, std::fabs(x[i]));
        }
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        int s = 0;
        for (int i = 0; i < 32; ++i) {
          const int q = std::clamp(static_cast<int>(std::lround(x[i] * id)), -127, 127);
          hq[static_cast<size_t>(n) * sh.K + 32 * u + i] = static_cast<int8_t>(q);
          s += q;
        }
        hd[static_cast<size_t>(n) * U + u] = make_float2(d, d * static_cast<float>(s));
      }
    int8_t* dq;
    float2* dd;
    float* dy;
    CK(cudaMalloc(&dq, hq.size()));
    CK(cudaMalloc(&dd, hd.size() * sizeof(float2)));
    CK(cudaMalloc(&dy, static_cast<size_t>(NMAX) * sh.M * 4));
    CK(cudaMemcpy(dq, hq.data(), hq.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dd, hd.data(), hd.size() * sizeof(float2), cudaMemcpyHostToDevice));

    // Scratch for the K splits of either kernel (the f16 one is timed on every shape, also where
    // mmq() would not pick it), and each one's split count.
    minfer::Tensor a;
    a.type = sh.type == 0 ? minfer::DType::Q4_K : minfer::DType::Q6_K;
    a.ne = {sh.K, sh.M, 1, 1};
    a.nb = {static_cast<size_t>(BB), static_cast<size_t>(nb1), static_cast<size_t>(nb1 * sh.M),
            static_cast<size_t>(nb1 * sh.M)};
    a.data = dw;
    const size_t f16_scratch = minfer::cuda::mmq_f16_scratch(kc, a, NMAX, 1);
    const size_t part_bytes = std::max(minfer::cuda::mmq_scratch(kc, a, NMAX, 1), f16_scratch);
    float* dpart;
    CK(cudaMalloc(&dpart, part_bytes + 16));
    const int ks_int8 = minfer::cuda::k_splits(kc, sh.M, U);
    const int ks_f16 = f16_scratch ? static_cast<int>(f16_scratch / (static_cast<size_t>(NMAX) * sh.M * 4)) : 1;
    const bool f16_ok = minfer::cuda::mmq_f16_supported(a);

    // Reference on a sample of rows (tile edges, ends, random).
    std::vector<int> sample = {0, 1, 7, 8, 15, 16, 63, 64, 127, 128, sh.M / 2, sh.M - 129, sh.M - 65, sh.M - 64, sh.M - 2, sh.M - 1};
    while (sample.size() < 128) sample.push_back(static_cast<int>(rng.next() % sh.M));
    std::vector<std::vector<double>> ref(NMAX, std::vector<double>(sample.size()));
    {
      std::vector<double> y, act(sh.K);
      std::vector<std::vector<double>> acts(NMAX, std::vector<double>(sh.K));
      for (int n = 0; n < NMAX; ++n)
        for (int k = 0; k < sh.K; ++k)
          acts[n][k] = static_cast<double>(hd[static_cast<size_t>(n) * U + k / 32].x) * hq[static_cast<size_t>(n) * sh.K + k];
      for (size_t si = 0; si < sample.size(); ++si) {
        deq_row(sh.type, hw.data() + static_cast<int64_t>(sample[si]) * nb1, sh.K, y);
        for (int n = 0; n < NMAX; ++n) {
          double s = 0;
          for (int k = 0; k < sh.K; ++k) s += y[k] * acts[n][k];
          ref[n][si] = s;
        }
      }
    }
    auto check = [&](int N) {
      std::vector<float> out(static_cast<size_t>(N) * sh.M);
      CK(cudaMemcpy(out.data(), dy, out.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0, scale = 0;
      for (int n = 0; n < N; ++n)
        for (size_t si = 0; si < sample.size(); ++si) scale = std::max(scale, std::fabs(ref[n][si]));
      for (int n = 0; n < N; ++n)
        for (size_t si = 0; si < sample.size(); ++si) {
          const double o = out[static_cast<size_t>(n) * sh.M + sample[si]];
          if (!std::isfinite(o)) return 1e30;
          worst = std::max(worst, std::fabs(o - ref[n][si]));
        }
      return worst / scale;
    };
    auto bench = [&](const char* kname, int N, int ks, const std::function<void(const uint8_t*)>& launch) {
      if (kfilter && N && !strstr(kname, kfilter)) return;
      CK(cudaMemsetAsync(dy, 0xFF, static_cast<size_t>(NMAX) * sh.M * 4, st));  // NaN: unwritten outputs fail
      launch(dw);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(st));
      const double err = N ? check(N) : 0.0;
      const double us = probe::graph_us(st, reps, 7, [&](int i) { launch(dw + wbytes * (i % copies)); });
      printf("| %s | %s | %d | %d | %.2f | %.0f | %.2e |\n", sh.name, kname, N, ks, us, wbytes / us / 1e3, err);
      if (N && !(err <= 1e-2)) {
        printf("FAIL %s %s N=%d max rel err %.3e\n", sh.name, kname, N, err);
        ++fails;
      }
      fflush(stdout);
    };

    bench("read", 0, 1, [&](const uint8_t* w) {
      read_kernel<<<sms * 16, 256, 0, st>>>(reinterpret_cast<const int4*>(w), wbytes / 16, dscratch);
    });
    for (const int N : Ns) {
      const auto launch_int8 = [&](const uint8_t* w) {
        a.data = const_cast<uint8_t*>(w);
        if (sh.type == 0) minfer::cuda::launch_t<minfer::DType::Q4_K>(kc, a, dq, dd, N, 1, 1, dy, nullptr, dpart);
        else minfer::cuda::launch_t<minfer::DType::Q6_K>(kc, a, dq, dd, N, 1, 1, dy, nullptr, dpart);
      };
      if (N <= minfer::cuda::kMatvecMaxRows)
        bench("mmvq", N, 1, [&](const uint8_t* w) {
          a.data = const_cast<uint8_t*>(w);
          minfer::cuda::mmvq(kc, a, dq, dd, N, 1, 1, dy, nullptr, dpart);
        });
      if (N > minfer::cuda::kMmvqRows) bench("int8", N, ks_int8, launch_int8);
      if (f16_ok)
        bench("f16", N, ks_f16, [&](const uint8_t* w) {
          a.data = const_cast<uint8_t*>(w);
          minfer::cuda::mmq_f16(kc, a, dq, dd, N, 1, 1, dy, nullptr, dpart);
        });
    }
    CK(cudaFree(dw));
    CK(cudaFree(dq));
    CK(cudaFree(dd));
    CK(cudaFree(dy));
    CK(cudaFree(dpart));
  }
  printf("%s: %d failures\n", fails ? "FAILED" : "ok", fails);
  return fails ? 1 : 0;
}
