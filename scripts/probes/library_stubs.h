// The KernelContext members a probe that #includes a library kernel file needs (they live in the
// CUDA backend's .cpp files, which the probes do not link): error text and launch checks that
// print and exit. Include after the library file.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ops/cuda/common.h"

namespace minfer::cuda {
std::string KernelContext::where() const { return "probe"; }
void KernelContext::check_launch(const char* kernel) const {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    fprintf(stderr, "launching %s failed: %s\n", kernel, cudaGetErrorString(e));
    exit(1);
  }
}
}  // namespace minfer::cuda
