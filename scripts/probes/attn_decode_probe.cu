// Decode-attention probe (not part of the library build): times the library's split-KV decode
// kernels (ops/cuda/k_attention.cu, #included verbatim) on the Qwen2.5-7B shape (28 query heads,
// 4 KV heads, head dim 128, KV block size 32, a shuffled block table) over 28 layers' caches, as
// a decode step reads them, and checks every kernel's output against a float64 CPU reference.
// Build here, run on the GPU machine:
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -I. -o /tmp/attn_probe scripts/probes/attn_decode_probe.cu
//   /tmp/attn_probe
// Kernels: gqa = attn_gqa_kernel (SIMT, the decode kernel before the tensor-core one),
// mma = attn_mma_decode_kernel; each with the library's combine (attn_combine_kernel for T = 1,
// attn_combine_rows_kernel for T > 1); "8-warp combine" = attn_combine_kernel at every T, whose
// output must equal the library's bit for bit. Rows: cache type, queries T (each
// its own sequence at the depth), depth, us per layer (median of 7 replays of a graph of 28
// launches, one per layer), GB/s of K/V bytes, max |err| / max |ref| over the layer-0 output.
#include "ops/cuda/k_attention.cu"
#include "scripts/probes/library_stubs.h"
#include "scripts/probes/probe_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>


namespace minfer {
bool Tensor::is_contiguous() const { return true; }
namespace cuda {
void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line, const std::string&) {
  fprintf(stderr, "%s:%d %s: %s\n", file, line, what, cudaGetErrorString(e));
  exit(1);
}
// The prefill kernel (k_attention_fa.cu) is not linked: this probe times decode kernels only.
bool launch_fa(KernelContext&, const Tensor&, const Tensor&, const Tensor&, const Paged&, float, int, float*) {
  return false;
}
}  // namespace cuda
}  // namespace minfer

using namespace minfer;
using namespace minfer::cuda;

namespace probe {

constexpr int D = 128, NH = 28, NKV = 4, BS = 32, LAYERS = 28;
constexpr int64_t CAP = 33024;  // cells per sequence's table (the bench's -d 32768 context)

__global__ void fill_f16(__half* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2half((h & 0xffff) / 32768.0f - 1.0f);
  }
}
__global__ void fill_q8(unsigned char* p, int64_t nblocks, uint32_t seed) {
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < nblocks; b += (int64_t)gridDim.x * blockDim.x) {
    unsigned char* blk = p + b * 34;
    uint32_t h = (uint32_t)b * 2654435761u ^ seed;
    const __half d = __float2half(1.0f / 127.0f * (0.5f + (h & 255) / 256.0f));
    memcpy(blk, &d, 2);
    for (int i = 0; i < 32; ++i) {
      h ^= h << 13; h ^= h >> 17; h ^= h << 5;
      blk[2 + i] = (unsigned char)(int8_t)((int)(h % 255) - 127);
    }
  }
}

double elem(const std::vector<unsigned char>& c, DType t, int64_t cell, int hk, int e) {
  if (t == DType::F16) {
    uint16_t x;
    memcpy(&x, &c[((cell * NKV + hk) * D + e) * 2], 2);
    return probe::f16_to_f32(x);
  }
  const size_t row = (cell * NKV + hk) * (D / 32 * 34);
  const unsigned char* blk = &c[row + (e / 32) * 34];
  uint16_t d;
  memcpy(&d, blk, 2);
  return probe::f16_to_f32(d) * (double)(int8_t)blk[2 + e % 32];
}

struct Case {
  DType kv;
  int T;
  int64_t depth;
};

}  // namespace probe

using namespace probe;

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const int max_seqs = 16;
  const int64_t max_blocks = CAP / BS;
  const int64_t n_blocks = max_blocks * max_seqs;  // each sequence its own blocks
  const int64_t n_cells = n_blocks * BS;
  // Caches for every layer, f16 and q8_0.
  std::vector<unsigned char*> kf(LAYERS), vf(LAYERS), kq(LAYERS), vq(LAYERS);
  const size_t f16_bytes = (size_t)n_cells * NKV * D * 2, q8_bytes = (size_t)n_cells * NKV * (D / 32 * 34);
  for (int l = 0; l < LAYERS; ++l) {
    CK(cudaMalloc(&kf[l], f16_bytes));
    CK(cudaMalloc(&vf[l], f16_bytes));
    CK(cudaMalloc(&kq[l], q8_bytes));
    CK(cudaMalloc(&vq[l], q8_bytes));
    fill_f16<<<1024, 256, 0, st>>>((__half*)kf[l], f16_bytes / 2, 17 * l + 1);
    fill_f16<<<1024, 256, 0, st>>>((__half*)vf[l], f16_bytes / 2, 17 * l + 2);
    fill_q8<<<1024, 256, 0, st>>>(kq[l], q8_bytes / 34, 17 * l + 3);
    fill_q8<<<1024, 256, 0, st>>>(vq[l], q8_bytes / 34, 17 * l + 4);
  }
  CK(cudaStreamSynchronize(st));
  // Block table: sequence s owns a shuffled set of blocks.
  std::mt19937 rng(42);
  std::vector<int32_t> perm(n_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(perm.begin(), perm.end());  // [max_seqs rows][max_blocks]
  int32_t *d_table, *d_pos, *d_seq;
  CK(cudaMalloc(&d_table, table.size() * 4));
  CK(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_pos, 64 * 4));
  CK(cudaMalloc(&d_seq, 64 * 4));
  float *d_q, *d_out;
  CK(cudaMalloc(&d_q, (size_t)64 * NH * D * 4));
  CK(cudaMalloc(&d_out, (size_t)LAYERS * 64 * NH * D * 4));
  std::vector<float> hq((size_t)64 * NH * D);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : hq) x = nd(rng);
  CK(cudaMemcpy(d_q, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
  DeviceError* d_err;
  CK(cudaMalloc(&d_err, 4096));
  CK(cudaMemset(d_err, 0, 4096));
  char* work;
  const size_t work_bytes = 256u << 20;
  CK(cudaMalloc(&work, work_bytes));

  const float scale = 1.0f / std::sqrt((float)D);
  std::vector<Case> cases;
  for (DType kv : {DType::F16, DType::Q8_0})
    for (int64_t depth : {512, 4096, 16384, 32768}) cases.push_back({kv, 1, depth});
  for (DType kv : {DType::F16, DType::Q8_0})
    for (int T : {4, 16})
      for (int64_t depth : {512, 4096}) cases.push_back({kv, T, depth});
  printf("| kv | T | depth | kernel | us/layer | GB/s (K+V) | max err / max ref |\n|---|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    std::vector<int32_t> pos(c.T), seq(c.T);
    for (int t = 0; t < c.T; ++t) {
      pos[t] = (int32_t)(c.depth - 1 - 7 * t);  // slightly different lengths
      seq[t] = t;
    }
    CK(cudaMemcpy(d_pos, pos.data(), c.T * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_seq, seq.data(), c.T * 4, cudaMemcpyHostToDevice));
    Paged pk;
    pk.pos = d_pos;
    pk.seq = d_seq;
    pk.table = d_table;
    pk.max_blocks = (int32_t)max_blocks;
    pk.n_rows = max_seqs;
    pk.n_blocks = (int32_t)n_blocks;
    pk.bs_log2 = 5;
    // Reference for layer 0.
    std::vector<unsigned char> hk(c.kv == DType::F16 ? f16_bytes : q8_bytes), hv(hk.size());
    CK(cudaMemcpy(hk.data(), c.kv == DType::F16 ? kf[0] : kq[0], hk.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv.data(), c.kv == DType::F16 ? vf[0] : vq[0], hv.size(), cudaMemcpyDeviceToHost));
    std::vector<double> ref((size_t)c.T * NH * D);
    double max_ref = 0;
    for (int t = 0; t < c.T; ++t)
      for (int h = 0; h < NH; ++h) {
        const int kvh = h / (NH / NKV);
        const int64_t n = pos[t] + 1;
        std::vector<double> sc(n);
        double mx = -1e300;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t cell = (int64_t)table[seq[t] * max_blocks + j / BS] * BS + j % BS;
          double a = 0;
          for (int e = 0; e < D; ++e) a += (double)hq[((size_t)t * NH + h) * D + e] * elem(hk, c.kv, cell, kvh, e);
          sc[j] = a * scale;
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int e = 0; e < D; ++e) {
          double a = 0;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t cell = (int64_t)table[seq[t] * max_blocks + j / BS] * BS + j % BS;
            a += sc[j] * elem(hv, c.kv, cell, kvh, e);
          }
          ref[((size_t)t * NH + h) * D + e] = a / sum;
          max_ref = std::max(max_ref, std::fabs(a / sum));
        }
      }
    std::vector<float> lib_out;
    for (int kernel = 0; kernel < 4; ++kernel) {
      const char* kname = kernel == 0 ? "gqa" : kernel == 1 ? "mma" : kernel == 2 ? "mma w/o combine" : "mma, 8-warp combine";
      auto launch = [&](int l) {
        Tensor q, k, v;
        q.type = DType::F32;
        q.ne = {D, NH, c.T, 1};
        q.nb = {4, (size_t)D * 4, (size_t)D * NH * 4, (size_t)D * NH * c.T * 4};
        q.data = d_q;
        for (Tensor* x : {&k, &v}) {
          x->type = c.kv;
          x->ne = {D, NKV, n_cells, 1};
          const size_t row = c.kv == DType::F16 ? D * 2 : D / 32 * 34;
          x->nb = {c.kv == DType::F16 ? 2u : 1u, row, row * NKV, row * NKV * n_cells};
        }
        k.data = c.kv == DType::F16 ? kf[l] : kq[l];
        v.data = c.kv == DType::F16 ? vf[l] : vq[l];
        KernelContext kc{};
        kc.stream = st;
        kc.prop = &prop;
        kc.err = d_err;
        kc.work = work;
        kc.work_bytes = work_bytes;
        float* out = d_out + (size_t)l * 64 * NH * D;
        if (kernel >= 2) {  // 2: launch_mma_decode without its combine; 3, 4: other combine batches
          int n_splits = 0;
          SplitParts parts;
          if (c.kv == DType::F16)
            parts = launch_mma_split<D, DType::F16, DType::F16>(kc, q, k, v, pk, scale, NH / NKV, n_splits);
          else
            parts = launch_mma_split<D, DType::Q8_0, DType::Q8_0>(kc, q, k, v, pk, scale, NH / NKV, n_splits);
          if (kernel == 2) return;
          attn_combine_kernel<<<dim3(NH, c.T, D / 32), 32 * kCombineWarps, 0, st>>>(parts.acc, parts.ml, pk, n_splits,
                                                                                 D, out);
          return;
        }
        if (c.kv == DType::F16) {
          if (kernel == 0) launch_gqa<D, DType::F16, DType::F16>(kc, q, k, v, pk, scale, NH / NKV, out);
          else launch_mma_decode<D, DType::F16, DType::F16>(kc, q, k, v, pk, scale, NH / NKV, out);
        } else {
          if (kernel == 0) launch_gqa<D, DType::Q8_0, DType::Q8_0>(kc, q, k, v, pk, scale, NH / NKV, out);
          else launch_mma_decode<D, DType::Q8_0, DType::Q8_0>(kc, q, k, v, pk, scale, NH / NKV, out);
        }
      };
      CK(cudaMemset(d_out, 0xff, (size_t)64 * NH * D * 4));  // poison layer 0's output
      launch(0);
      CK(cudaStreamSynchronize(st));
      std::vector<float> got((size_t)c.T * NH * D);
      CK(cudaMemcpy(got.data(), d_out, got.size() * 4, cudaMemcpyDeviceToHost));
      double max_err = 0;
      bool nan = false;
      for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) nan = true;
        max_err = std::max(max_err, std::fabs(got[i] - ref[i]));
      }
      if (kernel == 1) lib_out = got;
      // The 8-warp combine (the library's for T = 1) must give the library's bits at every T.
      const bool same_bits = kernel != 3 || memcmp(got.data(), lib_out.data(), got.size() * 4) == 0;
      const double us = probe::graph_us(st, LAYERS, 7, [&](int l) { launch(l); });  // per layer
      double bytes = 0;
      for (int t = 0; t < c.T; ++t)
        bytes += (double)(pos[t] + 1) * NKV * 2 * (c.kv == DType::F16 ? D * 2 : D / 32 * 34);
      printf("| %s | %d | %lld | %s | %.1f | %.0f | %.2e%s |\n", c.kv == DType::F16 ? "f16" : "q8_0", c.T,
             (long long)c.depth, kname, us, bytes / (us * 1e-6) / 1e9, max_err / max_ref,
             kernel == 2 ? " (no output)" : nan || max_err > 2e-2 * max_ref ? " FAIL" : !same_bits ? " BITS DIFFER" : "");
      fflush(stdout);
    }
  }
  DeviceError herr;
  CK(cudaMemcpy(&herr, d_err, sizeof(herr), cudaMemcpyDeviceToHost));
  return 0;
}
