// Internal to ops/cuda (host code, also included by cuda_backend.cpp): the kernel table (one entry per Op) and the per-op entry points.
//
// Each entry queues the node's work on kc.stream (no host synchronization, no host reads of
// device data) and returns. `supports` says whether the entry handles a node's dtypes/layout;
// the backend's supports_op() answers with it. `workspace` says how many bytes of temporary
// device memory the kernel takes through kc.scratch_bytes(): the graph allocator plans them.
#pragma once

#include <array>

#include "ops/cuda/common.h"
#include "tensor/context.h"
#include "tensor/graph.h"

namespace minfer::cuda {

using Kernel = void (*)(KernelContext&, Tensor& dst);
using Supports = bool (*)(const Tensor& dst);
/// Workspace bytes of a node (kc: the device and options; no node or stream set).
using Workspace = size_t (*)(const KernelContext& kc, const Tensor& dst);

struct KernelEntry {
  Kernel run = nullptr;
  Supports supports = nullptr;    ///< nullptr: every node of the op is supported
  Workspace workspace = nullptr;  ///< nullptr: none
};

const std::array<KernelEntry, kOpCount>& kernel_table();


// k_elementwise.cu
void k_get_rows(KernelContext&, Tensor&);
void k_add(KernelContext&, Tensor&);
void k_mul(KernelContext&, Tensor&);
void k_scale(KernelContext&, Tensor&);
void k_silu(KernelContext&, Tensor&);
void k_swiglu(KernelContext&, Tensor&);
void k_concat(KernelContext&, Tensor&);
void k_cpy(KernelContext&, Tensor&);
void k_argmax(KernelContext&, Tensor&);
bool s_get_rows(const Tensor&);
bool s_cpy(const Tensor&);
/// Holds `stream` for `ns` nanoseconds (one thread spinning on the global timer): the per-kernel
/// profile (CudaOptions::profile) queues a graph's launches behind it, so the events around each
/// node time the kernel, not the host's launch of it.
void profile_gate(cudaStream_t stream, int64_t ns);

// k_norm.cu
void k_rms_norm(KernelContext&, Tensor&);
void k_rms_norm_q8_1(KernelContext&, Tensor&);
bool s_rms_norm_q8_1(const Tensor&);
void k_soft_max(KernelContext&, Tensor&);
void k_rope(KernelContext&, Tensor&);

// k_matmul.cu
void k_mul_mat(KernelContext&, Tensor&);
bool s_mul_mat(const Tensor&);
size_t w_mul_mat(const KernelContext&, const Tensor&);
void k_mul_mat_add(KernelContext&, Tensor&);
bool s_mul_mat_add(const Tensor&);

// k_attention.cu
void k_kv_store(KernelContext&, Tensor&);
void k_attention(KernelContext&, Tensor&);
size_t w_attention(const KernelContext&, const Tensor&);

// k_moe.cu
void k_top_k(KernelContext&, Tensor&);
void k_mul_mat_id(KernelContext&, Tensor&);
bool s_mul_mat_id(const Tensor&);
size_t w_mul_mat_id(const KernelContext&, const Tensor&);
void k_moe_sum(KernelContext&, Tensor&);
bool s_moe_sum(const Tensor&);

// k_parallel.cu (the tensor-parallel collectives: NCCL when the backend joined a group, else a copy)
void k_all_reduce(KernelContext&, Tensor&);
void k_all_gather(KernelContext&, Tensor&);
bool s_all_gather(const Tensor&);
size_t w_all_gather(const KernelContext&, const Tensor&);

// k_fused.cu
void k_qkv(KernelContext&, Tensor&);
bool s_qkv(const Tensor&);
size_t w_qkv(const KernelContext&, const Tensor&);
void k_ffn_swiglu(KernelContext&, Tensor&);
bool s_ffn_swiglu(const Tensor&);
size_t w_ffn_swiglu(const KernelContext&, const Tensor&);

// ---- shared building blocks (defined in k_matmul.cu / k_mmvq.cu / k_attention.cu) ----

/// The most activation rows (matmul N) or queries (attention T) the decode kernels take: the
/// tensor-core MMQ (k_mmq.cu) and split-KV attention. They are batch-invariant (a row gets the
/// same bits as when computed alone), which continuous batching and speculative verification
/// rely on; larger batches go to the GEMM and tiled-attention paths, which are not.
constexpr int64_t kDecodeMaxRows = 64;
/// The same for the dp4a MMVQ and the float matvec: 16 rows.
constexpr int64_t kMatvecMaxRows = 16;
/// Up to this many rows the dp4a MMVQ beats the tensor-core MMQ (H200, 7B Q4_K_M: 3.6 vs 5.8 ms a
/// step at 1 row, equal near 8; docs/perf/2026-12-01-many-sequences.md), so weights with both
/// kernels use MMVQ for 1..8 rows and MMQ for 9..64. Batch invariance holds within each range.
constexpr int64_t kMmvqRows = 8;

/// out[n][m] (+ batch) = a · b as MUL_MAT does, for a weight `a` and activations `b` already on
/// the device; dst is f32 contiguous [M, N, B2, B3]. Shared by MUL_MAT and the fused ops.
/// matmul() honours kc.residual/kc.residual_out (vec paths only; the dispatch loop checks
/// matmul_is_vec first) and kc.prequant_* when b is kc.prequant_src.
void matmul(KernelContext& kc, const Tensor& a, const Tensor& b, Tensor& dst);

/// Workspace bytes matmul(kc, a, b, ...) asks for (a fused op reserves them up front).
size_t matmul_scratch(const KernelContext& kc, const Tensor& a, const Tensor& b);
/// Bytes of the q8_1 planes of `rows` activation rows of K elements (qs, then ds; 256-aligned).
size_t q8_plane_bytes(int64_t rows, int64_t K);
inline size_t align256(size_t v) { return (v + 255) / 256 * 256; }
/// Where an RMS_NORM_Q8_1 with op param 1 set keeps its f32 rows: after the q8_1 planes.
inline size_t q8_norm_rows_offset(int64_t rows, int64_t K) { return align256(q8_plane_bytes(rows, K)); }
/// The q8_1 planes of `rows` activation rows of K elements at `base`, laid out as q8_plane_bytes
/// counts them: qs [rows][K] int8, then (256-aligned) ds [rows][K/32] float2 (d, d*sum).
struct Q8Planes {
  int8_t* qs;
  float2* ds;
};
inline Q8Planes q8_planes(void* base, int64_t rows, int64_t K) {
  char* p = static_cast<char*>(base);
  return {reinterpret_cast<int8_t*>(p), reinterpret_cast<float2*>(p + align256(static_cast<size_t>(rows * K)))};
}

/// True when `type` has an MMVQ (q8_1 activation, dp4a) kernel.
bool mmvq_supported(DType type);
/// Quantizes activations b (f32/f16, any strides, [K, N, B2, B3]) to the q8_1 planes used by
/// mmvq(): qs [rows][K] int8 and ds [rows][K/32] float2 (d, d*sum).
void quantize_q8_1(KernelContext& kc, const TD& b, DType btype, int8_t* qs, float2* ds);
/// h = silu(g) * u (f32 [n, N] views with row strides, n % 32 == 0) written as q8_1 planes.
void swiglu_q8_1(KernelContext& kc, const TD& g, const TD& u, int8_t* qs, float2* ds);
/// h = silu(g) * u into contiguous f32 [n, N].
void swiglu_f32(KernelContext& kc, const TD& g, const TD& u, float* h);
/// dst[n][m] = dot(a row m, activation row n) (+ residual[n][m] when given) for n < N, batch over
/// B2, B3, from q8_1 activation planes: the dp4a MMVQ up to kMmvqRows rows (kMatvecMaxRows for
/// weight types MMQ lacks), the tensor-core MMQ above (N <= kDecodeMaxRows) — and at every N for
/// the weights of mmq_f16_every_row().
/// `part`: scratch of mmq_scratch() bytes (nullptr when that is 0). Returns 1, or with `reduce`
/// false the number of K splits whose partial sums a split launch left in `part` ([split][batch]
/// [n][m], N * M * B2 * B3 floats a split; dst untouched), for the caller to add in split order as
/// mmq_reduce() does (the same bits).
int mmvq(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2,
         int64_t B3, float* dst, const float* residual, float* part, bool reduce = true);
/// Whether mmvq() at N activation rows hands weight `a` to mmq() rather than the dp4a MMVQ.
bool mmvq_runs_mmq(const Tensor& a, int64_t N);
/// MUL_MAT_ID's expert matvec: dst[(j + k t) M + m] = dot(row m of expert ids[j, t] of `as`, q8_1
/// activation row j % n_act + n_act t) for every slot j < k = ids.ne[0] and token t < ids.ne[1],
/// each pair as mmvq() with N = 1 computes it. A bad id is reported (kErrMulMatIdId), its outputs NaN.
/// `as2` (optional, with `dst2`): a second weight of as's shape, read with the same ids and
/// activations into dst2 (an expert FFN's gate and up); one launch when its type and strides are
/// as's, else two. Each output is what its own call would give.
void mmvq_id(KernelContext& kc, const Tensor& as, const Tensor& ids, const int8_t* qs, const float2* ds, int64_t n_act,
             float* dst, const Tensor* as2 = nullptr, float* dst2 = nullptr);
/// True when `type` has a tensor-core MMQ kernel (k_mmq.cu).
bool mmq_supported(DType type);
/// mmvq()'s MMQ half (same contract, `reduce` and result included).
int mmq(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
        float* dst, const float* residual, float* part, bool reduce = true);
/// MUL_MAT_ID's prefill plan, written on the device by k_moe.cu's plan kernel: the (token, slot)
/// pairs s = j + k t grouped by expert and cut into tiles of at most kGroupTile pairs of one expert.
struct MmqGroups {
  const int32_t* n_tiles = nullptr;  ///< one value: the tiles in use (<= max_tiles)
  const int4* tiles = nullptr;       ///< max_tiles of (expert, first index into order, pairs, unused)
  const int32_t* order = nullptr;    ///< every valid pair once, those of one expert together
  int64_t max_tiles = 0;             ///< the grid's bound: ceil(pairs / kGroupTile) + min(experts, pairs)
  int k = 1;                         ///< slots per token (ids.ne[0])
  int64_t n_act = 1;                 ///< activation rows per token (b.ne[1]); pair s reads row j % n_act + n_act t
};
constexpr int kGroupTile = 64;
/// dst[s M + m] = dot(row m of the expert of pair s, its q8_1 activation row) for every pair of
/// the plan, on the tensor cores: each tile's expert rows are read once for up to kGroupTile pairs.
/// A pair's bits are those of mmq()'s int8 kernel for its row (independent of the tile it shares),
/// not MMVQ's — nor mmq()'s f16 kernel, which mmq() picks for Q4_K / Q6_K weights with K >= 8192
/// or M >= 16384 (bigger than the experts of today's MoE models).
void mmq_grouped(KernelContext& kc, const Tensor& as, const MmqGroups& grp, const int8_t* qs, const float2* ds,
                 float* dst);
/// Scratch bytes of the partial sums of mmq() over `batches` (B2 * B3) batches of N rows: 0 when
/// the weight's K is not split (or it has no MMQ kernel). Enough for whichever kernel mmq() picks.
size_t mmq_scratch(const KernelContext& kc, const Tensor& a, int64_t N, int64_t batches);
/// dst[i] = (residual[i] +) the sum of part[z * n + i] over the K splits z = 0..n_split-1, added
/// in split order: the second pass of a K-split MMQ (k_mmq.cu, shared with k_mmq_f16.cu).
void mmq_reduce(KernelContext& kc, const float* part, int n_split, int64_t n, float* dst, const float* residual);
/// The f16 tensor-core MMQ (k_mmq_f16.cu) for Q4_K / Q6_K weights, which mmq() runs for big
/// weight shapes. Same contract as mmq(); `part`: mmq_f16_scratch() bytes. Supported: a Q4_K
/// weight whose rows and batch slices start 16-byte aligned, a Q6_K one 2-byte aligned.
bool mmq_f16_supported(const Tensor& a);
size_t mmq_f16_scratch(const KernelContext& kc, const Tensor& a, int64_t N, int64_t batches);
/// Weights that mmvq() sends to the f16 MMQ at every N, one row included: Q4_K with M >= 16384
/// rows (a gate|up projection) and Q6_K of the f16 kernel's shapes (K >= 8192 or M >= 16384: an
/// ffn_down, an LM head), where that kernel beats the dp4a MMVQ at one row and costs a fraction of
/// it at 4..8 (docs/perf/2026-12-06-mmf16-tiles.md). Their rows are batch-invariant at any N <= 64.
bool mmq_f16_every_row(const Tensor& a);
/// Whether mmvq() at N activation rows runs weight `a` on the f16 MMQ (every_row, or N > kMmvqRows).
bool mmq_runs_f16(const Tensor& a, int64_t N);
int mmq_f16(KernelContext& kc, const Tensor& a, const int8_t* qs, const float2* ds, int64_t N, int64_t B2, int64_t B3,
            float* dst, const float* residual, float* part, bool reduce = true);
/// Whether mmq_f16_swiglu() takes gate|up weight `wgu` [K, 2 n_ff] at N rows: mmvq() would run it
/// on the f16 MMQ without a K split, one batch, n_ff % 32 == 0.
bool mmq_f16_swiglu_ok(const KernelContext& kc, const Tensor& wgu, int64_t N);
/// h = silu(gate) * up of the gate|up projection (gate = rows [0, n_ff), up = rows [n_ff, 2 n_ff)
/// of `wgu`) from x's q8_1 planes (qs, ds: N rows of K), written as h's q8_1 planes (hq [N][n_ff],
/// hd [N][n_ff / 32]) by the matmul's epilogue: bit for bit mmvq() into f32 followed by
/// swiglu_q8_1(), without the f32 round trip and the second launch. Throws std::logic_error
/// unless mmq_f16_swiglu_ok().
void mmq_f16_swiglu(KernelContext& kc, const Tensor& wgu, const int8_t* qs, const float2* ds, int64_t N, int8_t* hq,
                    float2* hd);
/// The most activation rows a q8_1 decode matmul of weight `type` takes: kDecodeMaxRows with
/// MMQ, kMatvecMaxRows with MMVQ only, 0 without either.
int64_t q8_decode_rows(DType type);

/// The q8_1 planes of activations b ([K, rows] with rows = ne[1] ne[2] ne[3]): the
/// RMS_NORM_Q8_1's when b is kc.prequant_src (fused_activations), else b quantized into the
/// workspace at kc.scratch_offset (q8_plane_bytes(rows, K) bytes, which the caller keeps).
struct Q8PlanesView {
  const int8_t* qs;
  const float2* ds;
};
Q8PlanesView activation_planes(KernelContext& kc, const Tensor& b);
/// A matmul's f32 result as matmul_partial() leaves it: `splits` slices of `stride` floats from
/// `data`; element i is data[i] + data[stride + i] + ... added in slice order (one slice: the
/// result itself).
struct MatmulSlices {
  const float* data;
  int splits;
  int64_t stride;
};
/// matmul(kc, a, b, dst) without its K-split reduction, for a consumer that adds the slices while
/// it reads them (the same bits as matmul). No residual (kc.residual must be unset). The slices
/// live in the call's workspace: the caller keeps kc.scratch_offset past them until it has read
/// them (matmul_scratch() bytes from the offset at the call).
MatmulSlices matmul_partial(KernelContext& kc, const Tensor& a, const Tensor& b, Tensor& dst);

/// Whether matmul(kc, a, b, ...) runs a decode kernel (q8_decode_rows, or the float matvec up to
/// kMatvecMaxRows) that can add a residual in
/// its epilogue and use pre-quantized q8_1 activations (the latter: MMVQ weights only).
bool matmul_is_vec(const Tensor& a, int64_t n_cols);
bool matmul_is_mmvq(const Tensor& a, int64_t n_cols);

/// The f32 activations a fused op's matmuls read: src[0] itself, or, when src[0] is an
/// RMS_NORM_Q8_1 node, a shape-only tensor of its input's shape, with kc.prequant_* pointing at
/// its q8_1 planes (matmul() then uses them). `shape` is the storage for the latter.
const Tensor& fused_activations(KernelContext& kc, const Tensor& node, Tensor& shape);

}  // namespace minfer::cuda
