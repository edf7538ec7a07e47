// Fused ops on the GPU.
//
// QKV: the q/k/v projections as one matmul when wq|wk|wv are adjacent rows of one weight (else
// three), then ONE epilogue kernel per (head, token) that adds the bias, applies the per-head
// RMSNorm (Qwen3's q_norm/k_norm), rotates q and k (RoPE with its scaling and the optional frequency
// factors in src[13], positions from the device) and stores k and v into the caches at their cells;
// the rotated q is the node's output. The decomposition in ops/lower.cpp spends up to 9 kernels on
// the same work; the arithmetic here is the same, in the same order (bias, norm, rope, store).
//
// FFN_SWIGLU: gate|up as one matmul when adjacent (else two), SwiGLU, down. For decode (a q8_1
// down path) the SwiGLU kernel writes the down projection's q8_1 activations directly — or, when
// gate|up runs on the f16 MMQ unsplit (a big Q4_K gate|up), that matmul's epilogue does
// (mmq_f16_swiglu: the same bits, with one launch fewer and no f32 round trip).
// With expert ids in src[5] (a MoE FFN's three MUL_MAT_IDs at decode sizes): the activations
// quantized once for gate and up (or read from the norm that wrote them), gate and up in one
// launch, each (token, slot) pair through its expert's rows (mmvq_id, as MUL_MAT_ID), the SwiGLU
// written as the down projection's q8_1 planes.
#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "ops/cuda/device.cuh"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/quant_device.cuh"
#include "ops/rope.h"

namespace minfer::cuda {
namespace {

struct QkvArgs {
  // matmul output rows of q, k, v: head h of token t at base + t * stride + h * hd, summed over
  // `splits` K-split slices `split_stride` floats apart (matmul_partial; one: the result)
  const float* src[3];
  int64_t stride[3];
  int splits[3];
  int64_t split_stride[3];
  const char* bias[3];  // optional bq, bk, bv (f32/f16, element stride bias_nb0)
  DType bias_type[3];
  int64_t bias_nb0[3];
  const char* norm[2];  // optional q_norm, k_norm
  DType norm_type[2];
  int64_t norm_nb0[2];
  float eps;
  const int32_t* pos;    // RoPE positions
  const int32_t* cells;  // KV cells the k/v rows are stored in
  float* dst;  // [hd, n_head, N]
  TD kc, vc;   // caches [hd, n_head_kv, n_cells]
  int hd, n_head, n_head_kv, n_rot;
  bool neox;
  double freq_base, freq_scale, ext_factor, attn_factor;
  ops::RopeCorrDims corr;
  const float* freq_factors;  // optional [n_rot/2]
  ErrorSink sink;
};

template <DType C>
__device__ __forceinline__ void store_cache_row(const float* row, char* out, int hd) {
  if constexpr (C == DType::Q8_0) {
    const int lane = threadIdx.x & 31;
    for (int b = threadIdx.x >> 5; b < hd / 32; b += blockDim.x >> 5)
      warp_quantize_q8_0(row[b * 32 + lane], reinterpret_cast<BlockQ8_0*>(out) + b, lane);
  } else {
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
      if constexpr (C == DType::F32) reinterpret_cast<float*>(out)[e] = row[e];
      else reinterpret_cast<__half*>(out)[e] = __float2half_rn(row[e]);
    }
  }
}

template <DType KC, DType VC>
__global__ void qkv_epilogue_kernel(QkvArgs a) {
  extern __shared__ float row[];  // [hd]
  __shared__ float red[32];
  const int hh = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int hd = a.hd;
  const int kind = hh < a.n_head ? 0 : hh < a.n_head + a.n_head_kv ? 1 : 2;  // q, k, v
  const int h = kind == 0 ? hh : kind == 1 ? hh - a.n_head : hh - a.n_head - a.n_head_kv;
  const float* src = a.src[kind] + t * a.stride[kind] + static_cast<int64_t>(h) * hd;
  const int splits = a.splits[kind];
  const int64_t ss_stride = a.split_stride[kind];
  const char* bias = a.bias[kind];
  // The K splits in split order (mmq_reduce's), the bias (per output row, broadcast over tokens),
  // then the per-head RMSNorm of q and k.
  float ss = 0.0f;
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float v = src[e];
    for (int z = 1; z < splits; ++z) v += src[z * ss_stride + e];
    if (bias) v += load_scalar(a.bias_type[kind], bias + (static_cast<int64_t>(h) * hd + e) * a.bias_nb0[kind]);
    row[e] = v;
    ss += v * v;
  }
  const bool norm = kind < 2 && a.norm[kind] != nullptr;
  if (norm) {
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(hd) + a.eps);
    for (int e = threadIdx.x; e < hd; e += blockDim.x)
      row[e] = row[e] * inv * load_scalar(a.norm_type[kind], a.norm[kind] + e * a.norm_nb0[kind]);
  }
  __syncthreads();
  // RoPE on q and k as rope_kernel (k_norm.cu): pair k rotates by pos * ops::rope_theta (scaling,
  // YaRN ramp, freq factors; double angles), cos/sin scaled by attn_factor.
  const int32_t p = a.pos[t];
  if (kind < 2) {
    const int half = a.n_rot / 2;
    for (int k = threadIdx.x; k < half; k += blockDim.x) {
      const double theta = ops::rope_theta(k, a.n_rot, a.freq_base, a.freq_scale, a.ext_factor, a.corr,
                                           a.freq_factors ? static_cast<double>(a.freq_factors[k]) : 1.0);
      double sd, cd;
      sincos(static_cast<double>(p) * theta, &sd, &cd);
      const float c = static_cast<float>(cd * a.attn_factor), s = static_cast<float>(sd * a.attn_factor);
      const int i0 = a.neox ? k : 2 * k, i1 = a.neox ? k + half : 2 * k + 1;
      const float x0 = row[i0], x1 = row[i1];
      row[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
      row[i1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    }
    __syncthreads();
  }
  if (kind == 0) {
    float* out = a.dst + (t * a.n_head + h) * hd;
    for (int e = threadIdx.x; e < hd; e += blockDim.x) out[e] = row[e];
    return;
  }
  const TD& cache = kind == 1 ? a.kc : a.vc;
  const int32_t cell = a.cells[t];
  if (cell < 0 || cell >= cache.ne[2]) {
    if (threadIdx.x == 0) report_error(a.sink, kErrKvStorePos, cell, cache.ne[2]);
    return;
  }
  char* out = cache.data + static_cast<int64_t>(h) * cache.nb[1] + static_cast<int64_t>(cell) * cache.nb[2];
  if (kind == 1) store_cache_row<KC>(row, out, hd);
  else store_cache_row<VC>(row, out, hd);
}

bool weight_ok(const Tensor* w) {
  if (!w) return false;
  switch (w->type) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q4_1: case DType::Q5_0:
    case DType::Q5_1: case DType::Q8_0: case DType::Q8_1: case DType::Q2_K: case DType::Q3_K: case DType::Q4_K:
    case DType::Q5_K: case DType::Q6_K:
      break;
    default: return false;
  }
  return w->nb[0] == dtype_type_size(w->type) && w->nb[1] % dtype_type_size(w->type) == 0 && w->ne[2] == 1 &&
         w->ne[3] == 1;
}

bool small_float(const Tensor* t) { return !t || t->type == DType::F32 || t->type == DType::F16; }

// ops::adjacent_rows without a Context: b's rows directly follow a's in one contiguous storage.
bool adjacent(const Tensor* a, const Tensor* b) {
  if (!a->view_src || a->view_src != b->view_src || a->type != b->type || a->ne[0] != b->ne[0]) return false;
  if (!a->is_contiguous() || !b->is_contiguous()) return false;
  return b->view_offs == a->view_offs + a->nbytes() && static_cast<const char*>(b->data) ==
                                                            static_cast<const char*>(a->data) + a->nbytes();
}

// A stack tensor describing contiguous f32 [m, n] at p.
Tensor f32_matrix(float* p, int64_t m, int64_t n) {
  Tensor t;
  t.type = DType::F32;
  t.ne = {m, n, 1, 1};
  t.nb = {4, static_cast<size_t>(m) * 4, static_cast<size_t>(m * n) * 4, static_cast<size_t>(m * n) * 4};
  t.data = p;
  return t;
}


template <DType KC>
void launch_epilogue_v(const QkvArgs& a, DType vt, dim3 grid, int threads, size_t smem, cudaStream_t s) {
  switch (vt) {
    case DType::F32: qkv_epilogue_kernel<KC, DType::F32><<<grid, threads, smem, s>>>(a); break;
    case DType::F16: qkv_epilogue_kernel<KC, DType::F16><<<grid, threads, smem, s>>>(a); break;
    default: qkv_epilogue_kernel<KC, DType::Q8_0><<<grid, threads, smem, s>>>(a); break;
  }
}

// The activations of a fused op: f32 [n_embd, N], or the q8_1 planes of an RMS_NORM_Q8_1 of them.
bool activations_ok(const Tensor* x) {
  if (x && x->op == Op::RMS_NORM_Q8_1) x = x->src[0];
  return x && x->type == DType::F32 && x->ne[2] == 1 && x->ne[3] == 1;
}

}  // namespace

const Tensor& fused_activations(KernelContext& kc, const Tensor& node, Tensor& shape) {
  const Tensor& x = *node.src[0];
  if (x.op != Op::RMS_NORM_Q8_1) return x;
  const Tensor& in = *x.src[0];
  shape.type = in.type;
  shape.ne = in.ne;
  shape.nb = in.nb;
  shape.data = nullptr;  // matmul() reads the planes instead
  kc.prequant_src = &shape;
  const Q8Planes planes = q8_planes(x.data, in.nrows(), in.ne[0]);
  kc.prequant_qs = planes.qs;
  kc.prequant_ds = planes.ds;
  return shape;
}

namespace {

// How k_qkv lays out its workspace: the projection output [nq + nk + nv, N] f32, then what its
// matmul(s) take. The projections run as one matmul when wq|wk|wv are adjacent rows, as wq|wk and
// wv when only q and k are (a Q4_K_M file stores attn_v of some layers as Q6_K: two launches
// instead of three), else as three.
struct QkvPlan {
  bool one_matmul, qk_matmul;
  Tensor wqkv;  // wq|wk|wv (one_matmul) or wq|wk (qk_matmul) as one weight
  size_t out_bytes, sub;
};

QkvPlan qkv_plan(const KernelContext& kc, const Tensor& node, const Tensor& x) {
  const Tensor &wq = *node.src[1], &wk = *node.src[2], &wv = *node.src[3];
  const int64_t N = x.ne[1], nq = wq.ne[1], nk = wk.ne[1], nv = wv.ne[1];
  QkvPlan p{};
  p.qk_matmul = adjacent(&wq, &wk);
  p.one_matmul = p.qk_matmul && adjacent(&wk, &wv);
  // Each matmul's workspace apart: it holds K-split slices until the epilogue adds them.
  if (p.qk_matmul) {
    p.wqkv = wq;
    p.wqkv.ne[1] = nq + nk + (p.one_matmul ? nv : 0);
    p.sub = align256(matmul_scratch(kc, p.wqkv, x)) + (p.one_matmul ? size_t{0} : align256(matmul_scratch(kc, wv, x)));
  } else {
    p.sub = align256(matmul_scratch(kc, wq, x)) + align256(matmul_scratch(kc, wk, x)) + align256(matmul_scratch(kc, wv, x));
  }
  p.out_bytes = align256(static_cast<size_t>((nq + nk + nv) * N) * 4);
  return p;
}

// The f32 input shape of a fused op's activations (src[0] or the RMS_NORM_Q8_1's input).
const Tensor& activation_shape(const Tensor& node) {
  const Tensor& x = *node.src[0];
  return x.op == Op::RMS_NORM_Q8_1 ? *x.src[0] : x;
}

}  // namespace

size_t w_qkv(const KernelContext& kc, const Tensor& node) {
  const QkvPlan p = qkv_plan(kc, node, activation_shape(node));
  return p.out_bytes + p.sub;
}

bool s_qkv(const Tensor& n) {
  const Tensor *x = n.src[0], *wq = n.src[1], *wk = n.src[2], *wv = n.src[3];
  const Tensor *pos = n.src[9], *kc = n.src[10], *vc = n.src[11], *cells = n.src[12];
  if (!activations_ok(x) || !weight_ok(wq) || !weight_ok(wk) || !weight_ok(wv)) return false;
  for (int i = 4; i <= 8; ++i)
    if (!small_float(n.src[i])) return false;
  if (!pos || !pos->is_contiguous() || !cells || !cells->is_contiguous() || !kc || !vc || !kc->is_contiguous() ||
      !vc->is_contiguous())
    return false;
  if (const Tensor* ff = n.src[13]; ff && (ff->type != DType::F32 || !ff->is_contiguous())) return false;
  const int64_t hd = n.param<int32_t>(2);
  for (const Tensor* c : {kc, vc}) {
    if (c->type != DType::F32 && c->type != DType::F16 && c->type != DType::Q8_0) return false;
    if (c->type == DType::Q8_0 && hd % 32 != 0) return false;
  }
  return hd > 0 && hd <= 4096;
}

void k_qkv(KernelContext& kc, Tensor& node) {
  Tensor shape;
  const Tensor& x = fused_activations(kc, node, shape);
  const Tensor &wq = *node.src[1], &wk = *node.src[2], &wv = *node.src[3];
  const Tensor& pos = *node.src[9];
  Tensor &kcache = *node.src[10], &vcache = *node.src[11];
  const int n_head = node.param<int32_t>(0), n_head_kv = node.param<int32_t>(1), hd = node.param<int32_t>(2);
  const ops::RopeParams rp = ops::rope_params_of(node, 4);
  const int64_t N = x.ne[1], nq = wq.ne[1], nk = wk.ne[1], nv = wv.ne[1];
  if (N == 0) return;

  const QkvPlan plan = qkv_plan(kc, node, x);
  const Tensor& wqkv = plan.wqkv;
  const size_t out_bytes = plan.out_bytes;
  auto* out = static_cast<float*>(kc.scratch_bytes(out_bytes + plan.sub));  // reserves both parts
  const size_t saved = kc.scratch_offset;
  kc.scratch_offset += out_bytes;
  QkvArgs a{};
  // Each projection into its rows of `out`; its workspace (and K-split slices, which the epilogue
  // adds) after the previous one's.
  auto project = [&](const Tensor& w, float* o) {
    Tensor ot = f32_matrix(o, w.ne[1], N);
    const MatmulSlices r = matmul_partial(kc, w, x, ot);
    kc.scratch_offset += align256(matmul_scratch(kc, w, x));
    return r;
  };
  auto take = [&](int kind, const MatmulSlices& r, int64_t row0, int64_t stride) {
    a.src[kind] = r.data + row0;
    a.stride[kind] = stride;
    a.splits[kind] = r.splits;
    a.split_stride[kind] = r.stride;
  };
  if (plan.qk_matmul) {  // wq|wk, and wv with them when adjacent: one matmul of nf rows
    const int64_t nf = wqkv.ne[1];
    const MatmulSlices r = project(wqkv, out);
    take(0, r, 0, nf);
    take(1, r, nq, nf);
    if (plan.one_matmul) take(2, r, nq + nk, nf);
    else take(2, project(wv, out + nf * N), 0, nv);
  } else {
    take(0, project(wq, out), 0, nq);
    take(1, project(wk, out + nq * N), 0, nk);
    take(2, project(wv, out + (nq + nk) * N), 0, nv);
  }
  kc.scratch_offset = saved;
  kc.prequant_src = nullptr;
  for (int i = 0; i < 3; ++i) {
    const Tensor* b = node.src[4 + i];
    a.bias[i] = b ? static_cast<const char*>(b->data) : nullptr;
    a.bias_type[i] = b ? b->type : DType::F32;
    a.bias_nb0[i] = b ? static_cast<int64_t>(b->nb[0]) : 0;
  }
  for (int i = 0; i < 2; ++i) {
    const Tensor* w = node.src[7 + i];
    a.norm[i] = w ? static_cast<const char*>(w->data) : nullptr;
    a.norm_type[i] = w ? w->type : DType::F32;
    a.norm_nb0[i] = w ? static_cast<int64_t>(w->nb[0]) : 0;
  }
  a.eps = node.param<float>(3);
  a.pos = static_cast<const int32_t*>(pos.data);
  a.cells = static_cast<const int32_t*>(node.src[12]->data);
  a.dst = static_cast<float*>(node.data);
  a.kc = td(kcache);
  a.vc = td(vcache);
  a.hd = hd;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.n_rot = rp.n_rot;
  a.neox = rp.mode == ops::RopeMode::NEOX;
  a.freq_base = rp.freq_base;
  a.freq_scale = rp.freq_scale;
  a.ext_factor = rp.ext_factor;
  a.attn_factor = rp.attn_factor;
  a.corr = ops::rope_corr_dims(rp);
  a.freq_factors = node.src[13] ? static_cast<const float*>(node.src[13]->data) : nullptr;
  a.sink = kc.sink();
  const dim3 grid(static_cast<unsigned>(n_head + 2 * n_head_kv), static_cast<unsigned>(N));
  const int threads = row_threads(hd, 256);
  const size_t smem = static_cast<size_t>(hd) * sizeof(float);
  switch (kcache.type) {
    case DType::F32: launch_epilogue_v<DType::F32>(a, vcache.type, grid, threads, smem, kc.stream); break;
    case DType::F16: launch_epilogue_v<DType::F16>(a, vcache.type, grid, threads, smem, kc.stream); break;
    default: launch_epilogue_v<DType::Q8_0>(a, vcache.type, grid, threads, smem, kc.stream); break;
  }
  kc.check_launch("qkv_epilogue_kernel");
}

namespace {

// How k_ffn_swiglu lays out its workspace: gate|up output, then the down projection's input
// (q8_1 planes + MMQ partials at decode sizes, else f32), then what the matmuls take.
struct FfnPlan {
  bool one_matmul, q8;
  Tensor wgu;  // wg|wu as one weight (one_matmul)
  size_t gu_bytes, q8_bytes, h_bytes, sub;
};

FfnPlan ffn_plan(const KernelContext& kc, const Tensor& node, const Tensor& x) {
  const Tensor &wg = *node.src[1], &wu = *node.src[2], &wd = *node.src[3];
  const int64_t N = x.ne[1], n_ff = wg.ne[1];
  FfnPlan p{};
  p.one_matmul = adjacent(&wg, &wu);
  if (p.one_matmul) {
    p.wgu = wg;
    p.wgu.ne[1] = 2 * n_ff;
    p.sub = matmul_scratch(kc, p.wgu, x);
  } else {
    p.sub = std::max(matmul_scratch(kc, wg, x), matmul_scratch(kc, wu, x));
  }
  p.q8 = matmul_is_mmvq(wd, N);
  p.gu_bytes = align256(static_cast<size_t>(2 * n_ff * N) * 4);
  p.q8_bytes = q8_plane_bytes(N, n_ff);
  p.h_bytes = p.q8 ? p.q8_bytes + align256(mmq_scratch(kc, wd, N, 1)) : align256(static_cast<size_t>(n_ff * N) * 4);
  Tensor h = f32_matrix(nullptr, n_ff, N);
  p.sub = std::max(p.sub, p.q8 ? size_t{0} : matmul_scratch(kc, wd, h));
  return p;
}

// The expert form's workspace: x's q8_1 planes (none when an RMS_NORM_Q8_1 wrote them), gate and
// up outputs [n_ff, k, T] f32, then the q8_1 planes of the SwiGLU.
struct FfnIdPlan {
  size_t x_planes, g_bytes, h_planes;
  size_t total() const { return x_planes + 2 * g_bytes + h_planes; }
};

bool prequantized(const Tensor& node) { return node.src[0] && node.src[0]->op == Op::RMS_NORM_Q8_1; }

FfnIdPlan ffn_id_plan(const Tensor& node) {
  const Tensor &x = *node.src[0], &wg = *node.src[1], &ids = *node.src[5];
  const int64_t n_embd = wg.ne[0], n_ff = wg.ne[1], pairs = ids.ne[0] * ids.ne[1];
  return {prequantized(node) ? 0 : q8_plane_bytes(x.ne[1] * x.ne[2], n_embd),
          align256(static_cast<size_t>(n_ff * pairs) * 4), q8_plane_bytes(pairs, n_ff)};
}

bool expert_weight_ok(const Tensor* w, int64_t K, int64_t M, int64_t n_expert) {
  return w && mmvq_supported(w->type) && w->nb[0] == dtype_type_size(w->type) && w->ne[0] == K && w->ne[1] == M &&
         w->ne[2] == n_expert && w->ne[3] == 1 && K % 32 == 0;
}

// The expert form: x f32 [n_embd, 1, T] (or an RMS_NORM_Q8_1 of x [n_embd, T]), ids I32 [k, T]
// with T within MUL_MAT_ID's MMVQ range, gate/up [n_embd, n_ff, n_expert] and down
// [n_ff, n_embd, n_expert] of MMVQ types, no residual.
bool s_ffn_swiglu_id(const Tensor& n) {
  const Tensor *x = n.src[0], *wg = n.src[1], *wu = n.src[2], *wd = n.src[3], *ids = n.src[5];
  const bool pre = prequantized(n);
  if (pre) x = x->src[0];
  if (n.src[4] || !x || x->type != DType::F32 || x->ne[3] != 1) return false;
  if (pre ? x->ne[2] != 1 : x->ne[1] != 1) return false;
  const int64_t T = pre ? x->ne[1] : x->ne[2];
  if (ids->type != DType::I32 || ids->ne[1] != T || ids->ne[2] != 1 || ids->ne[1] > kMmvqRows) return false;
  const int64_t n_embd = x->ne[0], n_ff = wg ? wg->ne[1] : 0, n_expert = wg ? wg->ne[2] : 0;
  if (!expert_weight_ok(wg, n_embd, n_ff, n_expert) || !expert_weight_ok(wu, n_embd, n_ff, n_expert) ||
      !expert_weight_ok(wd, n_ff, n_embd, n_expert))
    return false;
  return n.type == DType::F32 && n.is_contiguous() && n.ne[0] == n_embd && n.ne[1] == ids->ne[0] &&
         n.ne[2] == ids->ne[1] && n.ne[3] == 1;
}

void k_ffn_swiglu_id(KernelContext& kc, Tensor& node) {
  const Tensor &x = *node.src[0], &wg = *node.src[1], &wu = *node.src[2], &wd = *node.src[3], &ids = *node.src[5];
  const int64_t n_embd = wg.ne[0], n_ff = wg.ne[1], k = ids.ne[0], T = ids.ne[1], pairs = k * T;
  if (pairs == 0) return;
  const FfnIdPlan p = ffn_id_plan(node);
  char* s = static_cast<char*>(kc.scratch_bytes(p.total()));
  const auto [xq, xd] = q8_planes(prequantized(node) ? x.data : s, T, n_embd);
  auto* g = reinterpret_cast<float*>(s + p.x_planes);
  auto* u = reinterpret_cast<float*>(s + p.x_planes + p.g_bytes);
  const auto [hq, hd] = q8_planes(s + p.x_planes + 2 * p.g_bytes, pairs, n_ff);
  if (!prequantized(node)) quantize_q8_1(kc, td(x), x.type, xq, xd);
  mmvq_id(kc, wg, ids, xq, xd, 1, g, &wu, u);
  swiglu_q8_1(kc, td(f32_matrix(g, n_ff, pairs)), td(f32_matrix(u, n_ff, pairs)), hq, hd);
  mmvq_id(kc, wd, ids, hq, hd, k, static_cast<float*>(node.data));
}

}  // namespace

size_t w_ffn_swiglu(const KernelContext& kc, const Tensor& node) {
  if (node.src[5]) return ffn_id_plan(node).total();
  const FfnPlan p = ffn_plan(kc, node, activation_shape(node));
  return p.gu_bytes + p.h_bytes + p.sub;
}

bool s_ffn_swiglu(const Tensor& n) {
  if (n.src[5]) return s_ffn_swiglu_id(n);
  const Tensor *x = n.src[0], *wg = n.src[1], *wu = n.src[2], *wd = n.src[3], *r = n.src[4];
  if (!activations_ok(x) || !weight_ok(wg) || !weight_ok(wu) || !weight_ok(wd)) return false;
  // A residual (src[4]) is added by the MMVQ epilogue of the down projection.
  return !r || (r->type == DType::F32 && r->is_contiguous() && same_shape(*r, n) && n.is_contiguous() &&
                matmul_is_mmvq(*wd, activation_shape(n).ne[1]));
}

void k_ffn_swiglu(KernelContext& kc, Tensor& node) {
  if (node.src[5]) return k_ffn_swiglu_id(kc, node);
  Tensor shape;
  const Tensor& x = fused_activations(kc, node, shape);
  const Tensor &wg = *node.src[1], &wu = *node.src[2], &wd = *node.src[3];
  const int64_t N = x.ne[1], n_ff = wg.ne[1];
  if (N == 0) return;
  const FfnPlan plan = ffn_plan(kc, node, x);
  const bool fused = plan.one_matmul, q8 = plan.q8;
  const Tensor& wgu = plan.wgu;
  const size_t gu_bytes = plan.gu_bytes, q8_bytes = plan.q8_bytes, h_bytes = plan.h_bytes;
  Tensor h = f32_matrix(nullptr, n_ff, N);
  char* base = static_cast<char*>(kc.scratch_bytes(gu_bytes + h_bytes + plan.sub));
  auto* gu = reinterpret_cast<float*>(base);
  char* hbuf = base + gu_bytes;
  const size_t saved = kc.scratch_offset;
  kc.scratch_offset += gu_bytes + h_bytes;
  // The residual belongs to the down projection only.
  const float* residual = node.src[4] ? static_cast<const float*>(node.src[4]->data) : nullptr;
  float* residual_out = residual ? static_cast<float*>(node.data) : nullptr;
  const bool glu = q8 && fused && mmq_f16_swiglu_ok(kc, wgu, N);
  const auto [qs, ds] = q8_planes(hbuf, N, n_ff);  // h's planes (q8)
  if (glu) {
    // gate|up, SwiGLU and h's q8_1 planes in one launch (mmq_f16_swiglu).
    const Q8PlanesView xp = activation_planes(kc, x);
    mmq_f16_swiglu(kc, wgu, xp.qs, xp.ds, N, qs, ds);
  } else {
    TD g{}, u{};
    if (fused) {
      Tensor o = f32_matrix(gu, 2 * n_ff, N);
      matmul(kc, wgu, x, o);
      g = td(o);
      g.ne[0] = n_ff;
      u = g;
      u.data += n_ff * 4;
    } else {
      Tensor og = f32_matrix(gu, n_ff, N), ou = f32_matrix(gu + n_ff * N, n_ff, N);
      matmul(kc, wg, x, og);
      matmul(kc, wu, x, ou);
      g = td(og);
      u = td(ou);
    }
    if (!q8) {
      kc.prequant_src = nullptr;
      if (residual_out) throw std::logic_error(kc.where() + ": residual fusion without the q8 down path");
      h.data = hbuf;
      swiglu_f32(kc, g, u, reinterpret_cast<float*>(hbuf));
      matmul(kc, wd, h, node);
      kc.scratch_offset = saved;
      return;
    }
    swiglu_q8_1(kc, g, u, qs, ds);
  }
  kc.prequant_src = nullptr;
  kc.scratch_offset = saved;
  auto* part = mmq_scratch(kc, wd, N, 1) ? reinterpret_cast<float*>(hbuf + q8_bytes) : nullptr;
  mmvq(kc, wd, qs, ds, N, 1, 1, residual_out ? residual_out : static_cast<float*>(node.data), residual, part);
}

}  // namespace minfer::cuda
