// Asynchronous global -> shared copies (cp.async, sm_80+): staged tiles that bypass registers
// and L1, in commit groups, so a kernel can compute on one tile while the next is in flight.
#pragma once

#include <cstdint>

namespace minfer::cuda {

// 16-byte global -> shared copies that bypass registers and L1 (sm_80+), in commit groups;
// cp_async_wait<N> waits until at most N groups are still in flight.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
// An 8-byte copy (through L1: .cg takes 16 bytes only), for arrays of 8-byte elements whose rows
// are not 16-byte aligned.
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem));
}
// A 4-byte copy, for rows with 4-byte alignment only (q8_0 rows of 68 bytes).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

}  // namespace minfer::cuda
