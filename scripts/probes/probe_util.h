// What the standalone CUDA probes in this folder share (not part of the library build): the
// CUDA-call check, a fast random generator, f16 bit conversions, the float64 reference
// dequantization of Q4_K / Q6_K rows, and the timing of a launch replayed from a CUDA graph.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

namespace probe {

// splitmix64: fast enough to fill hundreds of MB of weights.
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

inline float f16_to_f32(uint16_t h) {
  const uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, f = h & 1023;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(f), -24);
  else if (e == 31) v = f ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(f | 1024), static_cast<int>(e) - 25);
  return s ? -v : v;
}
inline uint16_t f32_to_f16(float x) {
  const __half h = __float2half_rn(x);
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

// Reference dequantization of a Q4_K (type 0) or Q6_K (type 1) row of K elements, ggml's
// formulas in float64.
inline void deq_row(int type, const uint8_t* row, int K, std::vector<double>& y) {
  y.resize(K);
  for (int b = 0; b < K / 256; ++b) {
    double* o = y.data() + 256 * b;
    if (type == 0) {
      const uint8_t* x = row + 144 * b;
      uint16_t dh, mh;
      memcpy(&dh, x, 2);
      memcpy(&mh, x + 2, 2);
      const double d = f16_to_f32(dh), dmin = f16_to_f32(mh);
      const uint8_t* sc = x + 4;
      const uint8_t* q = x + 16;
      for (int j = 0; j < 8; ++j) {
        int s, m;
        if (j < 4) {
          s = sc[j] & 63;
          m = sc[j + 4] & 63;
        } else {
          s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
          m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        }
        for (int l = 0; l < 32; ++l) {
          const int qv = (j & 1) ? (q[32 * (j >> 1) + l] >> 4) : (q[32 * (j >> 1) + l] & 0xF);
          o[32 * j + l] = d * s * qv - dmin * m;
        }
      }
    } else {
      const uint8_t* x = row + 210 * b;
      uint16_t dh;
      memcpy(&dh, x + 208, 2);
      const double d = f16_to_f32(dh);
      const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = x + 64 * h;
        const uint8_t* qh = x + 128 + 32 * h;
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          o[128 * h + l] = d * sc[8 * h + is] * q1;
          o[128 * h + l + 32] = d * sc[8 * h + is + 2] * q2;
          o[128 * h + l + 64] = d * sc[8 * h + is + 4] * q3;
          o[128 * h + l + 96] = d * sc[8 * h + is + 6] * q4;
        }
      }
    }
  }
}

// Microseconds per launch: launch(i) for i in [0, n) is captured into one CUDA graph on `st`,
// replayed once untimed and then `replays` times; the median replay over n.
template <class Launch>
double graph_us(cudaStream_t st, int n, int replays, Launch&& launch) {
  cudaGraph_t gr;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) launch(i);
  CK(cudaStreamEndCapture(st, &gr));
  CK(cudaGraphInstantiate(&ge, gr, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms_all;
  for (int it = 0; it <= replays; ++it) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (it > 0) ms_all.push_back(ms);
  }
  std::sort(ms_all.begin(), ms_all.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(gr));
  return ms_all[ms_all.size() / 2] * 1000.0 / n;
}

}  // namespace probe
