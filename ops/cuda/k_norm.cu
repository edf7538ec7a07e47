// Row-wise kernels: rms_norm, soft_max, rope (one block per row; semantics of ops/cpu/k_norm.cpp).
// Each may run in place (dst aliasing x): every element is read before the same thread writes it,
// and reductions finish (barrier) before the first write.
#include <string>

#include "ops/cuda/device.cuh"
#include "ops/cuda/kernels.cuh"
#include "ops/rope.h"

namespace minfer::cuda {
namespace {

__global__ void rms_norm_kernel(TD x, DType xt, TD w, DType wt, bool has_w, float eps, float* dst) {
  __shared__ float red[32];
  int64_t i1, i2, i3;
  split_row(blockIdx.x, x.ne, i1, i2, i3);
  const char* rx = td_row(x, i1, i2, i3);
  const int64_t n = x.ne[0];
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = load_scalar(xt, rx + i * x.nb[0]);
    s += v * v;
  }
  s = block_sum(s, red);
  const float inv = 1.0f / sqrtf(s / static_cast<float>(n) + eps);
  float* rd = dst + static_cast<int64_t>(blockIdx.x) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = load_scalar(xt, rx + i * x.nb[0]) * inv;
    if (has_w) v *= load_scalar(wt, w.data + i * w.nb[0]);
    rd[i] = v;
  }
}

__global__ void soft_max_kernel(TD x, const int32_t* pos, float scale, float* dst, ErrorSink sink) {
  __shared__ float red[32];
  int64_t i1, i2, i3;
  split_row(blockIdx.x, x.ne, i1, i2, i3);
  const char* rx = td_row(x, i1, i2, i3);
  const int64_t n = x.ne[0];
  int64_t n_vis = n;
  if (pos) {
    const int32_t p = pos[i1];
    if (p < 0) {
      if (threadIdx.x == 0) report_error(sink, kErrSoftMaxPos, p, 0);
      n_vis = 0;
    } else {
      n_vis = min(n, static_cast<int64_t>(p) + 1);
    }
  }
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n_vis; i += blockDim.x)
    mx = fmaxf(mx, scale * *reinterpret_cast<const float*>(rx + i * x.nb[0]));
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n_vis; i += blockDim.x)
    sum += expf(scale * *reinterpret_cast<const float*>(rx + i * x.nb[0]) - mx);
  sum = block_sum(sum, red);
  const float inv = 1.0f / sum;
  float* rd = dst + static_cast<int64_t>(blockIdx.x) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = 0.0f;
    if (i < n_vis) v = expf(scale * *reinterpret_cast<const float*>(rx + i * x.nb[0]) - mx) * inv;
    rd[i] = v;
  }
}

// Pair k of a head rotates by pos * theta_k (ops::rope_theta: scaling, YaRN ramp, freq factors),
// formed in double as on the CPU (f32 angles lose ~1e-4 rad at positions in the thousands); cos and
// sin are scaled by attn_factor in double, then rounded to f32.
struct RopeArgs {
  int n_rot;
  bool neox;
  double freq_base, freq_scale, ext_factor, attn_factor;
  ops::RopeCorrDims corr;
  const float* freq_factors;  // [n_rot/2] or null
};

__global__ void rope_kernel(TD x, const int32_t* pos, float* dst, RopeArgs r) {
  int64_t i1, i2, i3;
  split_row(blockIdx.x, x.ne, i1, i2, i3);
  const float* rx = reinterpret_cast<const float*>(td_row(x, i1, i2, i3));
  const int64_t hd = x.ne[0], e0 = x.nb[0] / 4;
  float* rd = dst + static_cast<int64_t>(blockIdx.x) * hd;
  const double position = static_cast<double>(pos[i2]);
  const int half = r.n_rot / 2;
  for (int k = threadIdx.x; k < half; k += blockDim.x) {
    const double theta = ops::rope_theta(k, r.n_rot, r.freq_base, r.freq_scale, r.ext_factor, r.corr,
                                         r.freq_factors ? static_cast<double>(r.freq_factors[k]) : 1.0);
    double sd, cd;
    sincos(position * theta, &sd, &cd);
    const float c = static_cast<float>(cd * r.attn_factor), s = static_cast<float>(sd * r.attn_factor);
    const int64_t a = r.neox ? k : 2 * k;
    const int64_t b = r.neox ? k + half : 2 * k + 1;
    const float x0 = rx[a * e0], x1 = rx[b * e0];
    rd[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    rd[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
  for (int64_t i = r.n_rot + threadIdx.x; i < hd; i += blockDim.x) rd[i] = rx[i * e0];
}

// rms_norm_kernel's values, quantized per 32-element block as quantize_q8_1_kernel does (one warp
// per block), so the planes equal those of the two separate kernels. A thread keeps its V elements
// (and their weights) in registers between the two passes: element threadIdx.x + j * blockDim.x is
// element `lane` of unit warp + j * warps, so the quantizing warps find them where the sum of
// squares read them, and the row is read from memory once. The loads are predicated, not behind a
// dtype switch (x is f32, the weight's type WT a template argument): behind load_scalar's switch
// they were issued one after another, ~9 us a decode step's row on the H100 (a DRAM or L2 latency
// per element a thread reads) where all in flight together take one latency. With `rows` (a MoE
// FFN's norm, whose router reads f32) the normed values are stored there too: rms_norm_kernel's
// f32 rows, from the same sums in the same order.
enum class NormW { None, F32, F16 };

template <int V, NormW WT>
__global__ void rms_norm_q8_1_kernel(const float* __restrict__ x, const void* __restrict__ w, float eps, int64_t n,
                                     int8_t* qs, float2* ds, float* rows) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const float* rx = x + r * n;
  float xv[V], wv[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
    const bool in = i < n;
    xv[j] = in ? __ldg(rx + i) : 0.0f;
    if constexpr (WT == NormW::F32) wv[j] = in ? __ldg(static_cast<const float*>(w) + i) : 1.0f;
    else if constexpr (WT == NormW::F16) wv[j] = in ? __half2float(__ldg(static_cast<const __half*>(w) + i)) : 1.0f;
    else wv[j] = 1.0f;
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) s += xv[j] * xv[j];  // the elements past n are zeros
  s = block_sum(s, red);
  const float inv = 1.0f / sqrtf(s / static_cast<float>(n) + eps);
  const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const int64_t U = n / 32;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int64_t b = (threadIdx.x >> 5) + static_cast<int64_t>(j) * nw;
    if (b >= U) break;  // whole warps: n is a multiple of 32
    float v = xv[j] * inv;
    if constexpr (WT != NormW::None) v *= wv[j];
    if (rows) rows[r * n + b * 32 + lane] = v;
    warp_quantize_q8_1(v, lane, qs + r * n + b * 32, ds + r * U + b);
  }
}

}  // namespace

bool s_rms_norm_q8_1(const Tensor& node) {
  const Tensor* x = node.src[0];
  const Tensor* w = node.src[1];
  if (!x || x->type != DType::F32 || !x->is_contiguous() || x->ne[0] % 32 != 0 || x->ne[0] > 32768) return false;
  if (w && ((w->type != DType::F32 && w->type != DType::F16) || w->nb[0] != dtype_type_size(w->type))) return false;
  const int64_t rows = x->nrows(), n = x->ne[0];
  const size_t need = node.param<int32_t>(1) ? q8_norm_rows_offset(rows, n) + static_cast<size_t>(rows * n) * 4
                                             : q8_plane_bytes(rows, n);
  return node.type == DType::I8 && node.nbytes() >= need;
}

// RMS_NORM_Q8_1: the q8_1 planes of the normed rows at node.data (qs [rows][n], then ds).
void k_rms_norm_q8_1(KernelContext& kc, Tensor& node) {
  const Tensor& x = *node.src[0];
  const Tensor* w = node.src[1];
  const int64_t rows = x.nrows();
  if (rows == 0) return;
  const Q8Planes planes = q8_planes(node.data, rows, x.ne[0]);
  const int64_t n = x.ne[0];
  char* rows_at = node.param<int32_t>(1) ? static_cast<char*>(node.data) + q8_norm_rows_offset(rows, n) : nullptr;
  auto* f32_rows = reinterpret_cast<float*>(rows_at);
  const int threads = row_threads(n, n > 512 * 32 ? 1024 : 512);
  const int64_t per_thread = ceil_div(n, threads);
  const NormW wt = !w ? NormW::None : w->type == DType::F16 ? NormW::F16 : NormW::F32;
  const auto launch = [&](auto v) {
    constexpr int V = decltype(v)::value;
    const auto run = [&](auto kernel) {
      kernel<<<static_cast<unsigned>(rows), threads, 0, kc.stream>>>(static_cast<const float*>(x.data),
                                                                     w ? w->data : nullptr, node.param<float>(0), n,
                                                                     planes.qs, planes.ds, f32_rows);
    };
    if (wt == NormW::None) run(rms_norm_q8_1_kernel<V, NormW::None>);
    else if (wt == NormW::F32) run(rms_norm_q8_1_kernel<V, NormW::F32>);
    else run(rms_norm_q8_1_kernel<V, NormW::F16>);
  };
  if (per_thread <= 1) launch(std::integral_constant<int, 1>{});
  else if (per_thread <= 2) launch(std::integral_constant<int, 2>{});
  else if (per_thread <= 4) launch(std::integral_constant<int, 4>{});
  else if (per_thread <= 8) launch(std::integral_constant<int, 8>{});
  else if (per_thread <= 16) launch(std::integral_constant<int, 16>{});
  else if (per_thread <= 32) launch(std::integral_constant<int, 32>{});
  else throw OpError(kc.where() + ": rms_norm_q8_1 rows of " + std::to_string(n) + " elements (at most 32768)");
  kc.check_launch("rms_norm_q8_1_kernel");
}

void k_rms_norm(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const Tensor* w = dst.src[1];
  const int64_t rows = x.nrows();
  if (rows == 0) return;
  TD wd{};
  if (w) wd = td(*w);
  rms_norm_kernel<<<static_cast<unsigned>(rows), row_threads(x.ne[0], 512), 0, kc.stream>>>(
      td(x), x.type, wd, w ? w->type : DType::F32, w != nullptr, dst.param<float>(0), static_cast<float*>(dst.data));
  kc.check_launch("rms_norm_kernel");
}

void k_soft_max(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const Tensor* pos = dst.src[1];
  const int64_t rows = x.nrows();
  if (rows == 0) return;
  if (pos && !pos->is_contiguous()) throw OpError(kc.where() + ": pos must be contiguous");
  soft_max_kernel<<<static_cast<unsigned>(rows), row_threads(x.ne[0], 512), 0, kc.stream>>>(
      td(x), pos ? static_cast<const int32_t*>(pos->data) : nullptr, dst.param<float>(0),
      static_cast<float*>(dst.data), kc.sink());
  kc.check_launch("soft_max_kernel");
}

void k_rope(KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  const Tensor* ff = dst.src[2];
  if (!pos.is_contiguous()) throw OpError(kc.where() + ": pos must be contiguous");
  if (x.nb[0] % 4 != 0) throw OpError(kc.where() + ": x elements must be 4-byte aligned");
  const ops::RopeParams p = ops::rope_params_of(dst);
  const int64_t rows = x.nrows();
  if (rows == 0) return;
  RopeArgs r{p.n_rot, p.mode == ops::RopeMode::NEOX, p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor,
             ops::rope_corr_dims(p), ff ? static_cast<const float*>(ff->data) : nullptr};
  rope_kernel<<<static_cast<unsigned>(rows), row_threads(x.ne[0] / 2, 128), 0, kc.stream>>>(
      td(x), static_cast<const int32_t*>(pos.data), static_cast<float*>(dst.data), r);
  kc.check_launch("rope_kernel");
}

}  // namespace minfer::cuda
