// Warp-level tensor-core primitives (sm_80+): mma.sync m16n8k16 with f16 inputs and f32
// accumulators, and ldmatrix loads of its fragments from shared memory.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), g = lane / 4, q = lane % 4:
//   A (16 x 16, row-major), 4 registers of 2 f16: a[0] = (row g, cols 2q, 2q+1),
//     a[1] = (row g+8, cols 2q..), a[2] = (row g, cols 2q+8..), a[3] = (row g+8, cols 2q+8..)
//   B (16 x 8, "col": column n is contiguous in k), 2 registers: b[0] = (rows 2q, 2q+1, col g),
//     b[1] = (rows 2q+8, 2q+9, col g)
//   C/D (16 x 8, f32), 4 registers: c[0], c[1] = (row g, cols 2q, 2q+1), c[2], c[3] = (row g+8, ...)
// ldmatrix: each of 8 lanes (per 8 x 8 matrix) gives the address of one 16-byte row; lane l then
// holds elements (row g, cols 2q, 2q+1) of each matrix, or with .trans (rows 2q, 2q+1, col g).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace minfer::cuda {

// c += A B, one m16n8k16 tile (f16 x f16 -> f32).
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8 x 8 f16 matrices; lanes 8i..8i+7 address the rows of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// Two f32 as one register of two f16 (round to nearest), x in the low half.
__device__ __forceinline__ uint32_t pack_half2(float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace minfer::cuda
