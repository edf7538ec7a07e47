// FlashAttention prefill probe (not part of the library build): times the library's mma.sync
// FlashAttention-2 prefill kernel (ops/cuda/k_attention_fa.cu, #included verbatim) against the
// WMMA kernel it replaced (copied below as old_fa_kernel, unchanged but for its names) over paged
// f16 and q8_0 KV caches, and checks every kernel against a float64 CPU reference. Build here,
// run on the GPU machine:
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
//   wmma_old  the WMMA kernel the library had before (64 queries x 64 keys, S and P through shared
//             memory, plain loads, one block per (query tile, head))
//   mma_w8    the library's launch_fa (8 warps x 16 queries a block, kFaWarps)
//   mma_w4    the same kernel with 4 warps (64 queries a block; two blocks per SM by registers)
#include "ops/cuda/k_attention_fa.cu"

#include <cuda_fp16.h>
#include <mma.h>

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

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

// ------------------------------------------------------------------ stubs for k_attention_fa.cu
// Out-of-line library functions the launcher refers to: defined here so the probe links without
// the library.
namespace minfer::cuda {
std::string KernelContext::where() const { return "fa_probe"; }
void KernelContext::check_launch(const char* kernel) const {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    fprintf(stderr, "launching %s failed: %s\n", kernel, cudaGetErrorString(e));
    exit(1);
  }
}
}  // namespace minfer::cuda

// ------------------------------------------------------------------ the WMMA kernel before
// ops/cuda/k_attention.cu's attn_fa_kernel at 06ddd33, renamed (old_*, kOld*).
namespace old_fa {
using namespace minfer;
using namespace minfer::cuda;

// Elements [8c, 8c + 8) of a K row as f32 (k_attention.cu's load8, f16 and q8_0 only).
template <DType T>
__device__ __forceinline__ void load8(const char* row, int c, float (&x)[8]) {
  if constexpr (T == DType::F16) {
    const uint4 u = *reinterpret_cast<const uint4*>(row + c * 16);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      x[2 * i] = f.x;
      x[2 * i + 1] = f.y;
    }
  } else {  // q8_0: 8 quants of one block (34 bytes: f16 scale, 32 int8), 2-byte aligned
    const char* blk = row + (c >> 2) * 34;
    const float d = __half2float(*reinterpret_cast<const __half*>(blk));
    const int8_t* qv = reinterpret_cast<const int8_t*>(blk + 2 + (c & 3) * 8);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(qv[i]) * d;
  }
}

constexpr int kOldQ = 64, kOldK = 64, kOldWarps = 4;

template <int D>
struct OldFaSmem {
  static constexpr int QP = D + 8, KP = D + 8, SP = kOldK + 4, PP = kOldK + 8, TP = D + 4;
  __half q[kOldQ][QP];
  __half k[kOldK][KP];
  __half v[kOldK][KP];
  union {
    float s[kOldWarps][16][SP];
    float t[kOldWarps][16][TP];
  } st;
  __half p[kOldWarps][16][PP];
  int64_t cells[kOldK];
  int32_t qpos[kOldQ], qseq[kOldQ];
};

template <DType T>
__device__ __forceinline__ void old_stage8(const char* row, int c, __half* out) {
  if constexpr (T == DType::F16) {
    *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(row + c * 16);
  } else {
    float x[8];
    load8<T>(row, c, x);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = __float2half_rn(x[i]);
  }
}

template <int D, DType KT, DType VT>
__global__ void __launch_bounds__(32 * kOldWarps) old_fa_kernel(TD q, TD k, TD v, Paged pk, float scale, int group,
                                                                float* dst, ErrorSink sink) {
  using namespace nvcuda;
  using S = OldFaSmem<D>;
  extern __shared__ __align__(128) unsigned char old_fa_raw[];
  S& sm = *reinterpret_cast<S*>(old_fa_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = blockIdx.y, n_head = gridDim.y, hk = h / group;
  const int64_t T = q.ne[2];
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kOldQ;

  for (int i = threadIdx.x; i < kOldQ; i += blockDim.x) {
    const int64_t t = t0 + i;
    int32_t p = -1, sq = -1;
    if (t < T) {
      const int32_t* r;
      const int64_t len = paged_query(pk, t, r, sink, h == 0);
      if (len > 0) {
        p = static_cast<int32_t>(len - 1);
        sq = pk.seq[t];
      }
    }
    sm.qpos[i] = p;
    sm.qseq[i] = sq;
  }
  for (int i = threadIdx.x; i < kOldQ * D; i += blockDim.x) {
    const int qi = i / D, e = i % D;
    const int64_t t = t0 + qi;
    const float x = t < T ? *reinterpret_cast<const float*>(q.data + e * q.nb[0] + h * q.nb[1] + t * q.nb[2]) * scale : 0.0f;
    sm.q[qi][e] = __float2half_rn(x);
  }
  __syncthreads();

  // Lane (r, half): query row r of this warp, output dims [half * D/2, half * D/2 + D/2).
  const int r = lane >> 1, half = lane & 1;
  const int qi = warp * 16 + r;
  float m = -INFINITY, l = 0.0f;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  const char* kbase = k.data + static_cast<int64_t>(hk) * k.nb[1];
  const char* vbase = v.data + static_cast<int64_t>(hk) * v.nb[1];

  for (int r0 = 0; r0 < kOldQ;) {
    // The next run of queries of one sequence and its largest visible key count.
    const int seq = sm.qseq[r0];
    int r1 = r0 + 1, kv_max = sm.qpos[r0] + 1;
    while (r1 < kOldQ && sm.qseq[r1] == seq) kv_max = max(kv_max, sm.qpos[r1++] + 1);
    if (seq < 0) kv_max = 0;
    const int32_t* row = pk.table + static_cast<int64_t>(max(seq, 0)) * pk.max_blocks;
    const bool mine = qi >= r0 && qi < r1;
    const int32_t my_pos = mine ? sm.qpos[qi] : -1;
    for (int j0 = 0; j0 < kv_max; j0 += kOldK) {
      const int jn = min(kOldK, kv_max - j0);
      for (int i = threadIdx.x; i < kOldK; i += blockDim.x) sm.cells[i] = i < jn ? paged_cell(pk, row, j0 + i, sink) : -1;
      __syncthreads();
      for (int i = threadIdx.x; i < kOldK * (D / 8); i += blockDim.x) {
        const int j = i / (D / 8), c = i % (D / 8);
        const int64_t cell = sm.cells[j];
        if (cell >= 0) {
          old_stage8<KT>(kbase + cell * k.nb[2], c, &sm.k[j][8 * c]);
          old_stage8<VT>(vbase + cell * v.nb[2], c, &sm.v[j][8 * c]);
        } else {
          *reinterpret_cast<uint4*>(&sm.k[j][8 * c]) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(&sm.v[j][8 * c]) = make_uint4(0, 0, 0, 0);
        }
      }
      __syncthreads();
      // S = Q K^T for this warp's 16 queries and the tile's 64 keys.
      {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kOldK / 16];
#pragma unroll
        for (int n = 0; n < kOldK / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
          wmma::load_matrix_sync(a, &sm.q[warp * 16][kk * 16], S::QP);
#pragma unroll
          for (int n = 0; n < kOldK / 16; ++n) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
            wmma::load_matrix_sync(b, &sm.k[n * 16][kk * 16], S::KP);
            wmma::mma_sync(acc[n], a, b, acc[n]);
          }
        }
#pragma unroll
        for (int n = 0; n < kOldK / 16; ++n)
          wmma::store_matrix_sync(&sm.st.s[warp][0][n * 16], acc[n], S::SP, wmma::mem_row_major);
      }
      __syncwarp();
      // Online softmax of row r over the tile: this lane's 32 columns, then the pair's.
      float sv[32];
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        const int col = half * 32 + c;
        const bool vis = j0 + col <= my_pos;
        sv[c] = vis ? sm.st.s[warp][r][col] : -INFINITY;
        mx = fmaxf(mx, sv[c]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_new = fmaxf(m, mx);
      const float corr = m_new == -INFINITY ? 1.0f : __expf(m - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        const float pv = sv[c] == -INFINITY ? 0.0f : __expf(sv[c] - m_new);
        sum += pv;
        sm.p[warp][r][half * 32 + c] = __float2half_rn(pv);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      l = l * corr + sum;
      m = m_new;
      __syncwarp();
      // This tile's P V into the warp's staging tile (it replaces the scores there).
      {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[D / 16];
#pragma unroll
        for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
        for (int kk = 0; kk < kOldK / 16; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
          wmma::load_matrix_sync(a, &sm.p[warp][0][kk * 16], S::PP);
#pragma unroll
          for (int n = 0; n < D / 16; ++n) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
            wmma::load_matrix_sync(b, &sm.v[kk * 16][n * 16], S::KP);
            wmma::mma_sync(acc[n], a, b, acc[n]);
          }
        }
        __syncwarp();  // every lane has read its scores before the tile is overwritten
#pragma unroll
        for (int n = 0; n < D / 16; ++n)
          wmma::store_matrix_sync(&sm.st.t[warp][0][n * 16], acc[n], S::TP, wmma::mem_row_major);
      }
      __syncwarp();
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] = o[i] * corr + sm.st.t[warp][r][half * (D / 2) + i];
      __syncthreads();  // K/V tiles are restaged next
    }
    r0 = r1;
  }
  const int64_t t = t0 + qi;
  if (t < T) {
    float* out = dst + (t * n_head + h) * D + half * (D / 2);
    const float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < D / 2; ++i) out[i] = o[i] * inv;
  }
}

template <int D, DType KT, DType VT>
void launch(cudaStream_t st, const TD& q, const TD& k, const TD& v, const Paged& pk, float scale, int group,
            float* out, ErrorSink sink) {
  const size_t smem = sizeof(OldFaSmem<D>);
  static const bool raised = [&] {
    CK(cudaFuncSetAttribute(old_fa_kernel<D, KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)raised;
  const int64_t T = q.ne[2], n_head = q.ne[1];
  old_fa_kernel<D, KT, VT><<<dim3(static_cast<unsigned>((T + kOldQ - 1) / kOldQ), static_cast<unsigned>(n_head)),
                             32 * kOldWarps, smem, st>>>(q, k, v, pk, scale, group, out, sink);
  CK(cudaGetLastError());
}

}  // namespace old_fa

// ------------------------------------------------------------------ host side
using minfer::DType;
using minfer::Tensor;

namespace {

// splitmix64
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

uint16_t f32_to_f16(float x) {
  const __half_raw r = __float2half_rn(x);
  return r.x;
}

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
  const minfer::cuda::ErrorSink sink = kc.sink();

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
      const minfer::cuda::TD tk = minfer::cuda::td(K), tv = minfer::cuda::td(V);

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
        const minfer::cuda::TD tq = minfer::cuda::td(Q);
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
          cudaGraph_t gr;
          cudaGraphExec_t ge;
          CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
          for (int i = 0; i < kLaunches; ++i) launch();
          CK(cudaStreamEndCapture(st, &gr));
          CK(cudaGraphInstantiate(&ge, gr, 0));
          cudaEvent_t e0, e1;
          CK(cudaEventCreate(&e0));
          CK(cudaEventCreate(&e1));
          std::vector<float> ms_all;
          for (int it = 0; it < 6; ++it) {  // one warm-up, then 5 timed replays
            CK(cudaEventRecord(e0, st));
            CK(cudaGraphLaunch(ge, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (it > 0) ms_all.push_back(ms);
          }
          std::sort(ms_all.begin(), ms_all.end());
          const double us = ms_all[ms_all.size() / 2] * 1000.0 / kLaunches;
          printf("| %s | %s | %s | %s | %.1f | %.1f | %.3e | %.3e |\n", sh.name, q8 ? "q8_0" : "f16", c.name.c_str(), kname,
                 us, flops / us / 1e6, err, ref_max);
          if (!(err <= 2e-2 * ref_max)) {
            printf("FAIL %s: max abs err %.3e > 2e-2 * max |ref| %.3e\n", key.c_str(), err, ref_max);
            ++fails;
          }
          fflush(stdout);
          CK(cudaEventDestroy(e0));
          CK(cudaEventDestroy(e1));
          CK(cudaGraphExecDestroy(ge));
          CK(cudaGraphDestroy(gr));
        };

        auto old = [&](auto d_tag, auto kv_tag) {
          constexpr int DD = decltype(d_tag)::value;
          constexpr DType KV = decltype(kv_tag)::value;
          return [&] { old_fa::launch<DD, KV, KV>(st, tq, tk, tv, pk, scale, group, dout, sink); };
        };
        using D64 = std::integral_constant<int, 64>;
        using D128 = std::integral_constant<int, 128>;
        using F16 = std::integral_constant<DType, DType::F16>;
        using Q80 = std::integral_constant<DType, DType::Q8_0>;
        if (D == 64 && q8) bench("wmma_old", old(D64{}, Q80{}));
        else if (D == 64) bench("wmma_old", old(D64{}, F16{}));
        else if (q8) bench("wmma_old", old(D128{}, Q80{}));
        else bench("wmma_old", old(D128{}, F16{}));
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
