// The op enum: what a graph node computes. Builders live in ops/ (one header per op family),
// kernels in per-backend tables indexed by Op (ops/cpu/, ops/cuda/). Each op's sources, params
// and shapes are documented at its builder.
#pragma once

#include <cstdint>
#include <string_view>

namespace minfer {

enum class Op : int32_t {
  NONE = 0,  // a leaf: input, weight or constant; nothing to compute

  // Views: the result aliases src[0]'s storage; no kernel runs.
  VIEW,
  RESHAPE,
  PERMUTE,
  TRANSPOSE,

  // Basic ops.
  CPY,        // copy/convert src[0] into the node (which may alias another tensor)
  GET_ROWS,   // embedding lookup
  ADD,
  MUL,
  SCALE,
  RMS_NORM,   // optional weight in src[1]
  MUL_MAT,
  ROPE,
  SOFT_MAX,
  SILU,
  SWIGLU,
  ATTENTION,  // causal GQA attention over a KV cache, positions-driven
  KV_STORE,   // scatter rows into a KV cache at positions; aliases the cache
  CONCAT,
  ARGMAX,
  TOP_K,       // ids of the k largest values of each row (MoE routing)
  MUL_MAT_ID,  // each token's activations times its selected experts' weights (MoE)
  ALL_REDUCE,  // the element-wise sum of src[0] over the ranks of the backend's group
  ALL_GATHER,  // the ranks' src[0] concatenated along dim 0, in rank order

  // Fused ops: no builder makes them. A backend's graph rewrite (Backend::rewrite) creates them
  // from patterns of basic ops before allocation, for its own kernels; the CUDA patterns and
  // sources are in ops/cuda/rewrite.cpp. Other backends never see them.
  FFN_SWIGLU,     // down(silu(gate x) * up x) (+ residual); ids in src[5]: each token's experts (MoE)
  QKV,            // q/k/v matmul(s) (+bias, +q/k norm) + RoPE + KV store of k and v; yields Q
  MUL_MAT_ADD,    // a x + residual
  RMS_NORM_Q8_1,  // rms_norm(x) * weight, written as the q8_1 planes its consumer's matmul reads
                  // (param 1 set: the f32 rows follow the planes, for a second, float consumer)
  MOE_SUM,        // sum over the k slots of y[:, j, t] * w[j, t] (+ residual): a MoE FFN's output

  COUNT
};

inline constexpr int kOpCount = static_cast<int>(Op::COUNT);

/// Upper-case op name, e.g. "MUL_MAT"; "?" for out-of-range values.
std::string_view op_name(Op op);

/// True for VIEW/RESHAPE/PERMUTE/TRANSPOSE: the node only reinterprets its source's bytes.
constexpr bool op_is_view(Op op) {
  return op == Op::VIEW || op == Op::RESHAPE || op == Op::PERMUTE || op == Op::TRANSPOSE;
}

/// True for ops whose output may take over src[0]'s storage (dst == src0, same layout): every
/// backend's kernel for them must read each element (row, for the row-wise ops) before writing it.
constexpr bool op_allows_inplace(Op op) {
  return op == Op::ADD || op == Op::MUL || op == Op::SCALE || op == Op::SILU || op == Op::SWIGLU ||
         op == Op::RMS_NORM || op == Op::SOFT_MAX || op == Op::ROPE;
}

/// True for the fused ops, which only a backend's graph rewrite creates.
constexpr bool op_is_fused(Op op) {
  return op == Op::FFN_SWIGLU || op == Op::QKV || op == Op::MUL_MAT_ADD || op == Op::RMS_NORM_Q8_1 ||
         op == Op::MOE_SUM;
}

}  // namespace minfer
