#include "runtime/backends.h"

#include <fmt/format.h>

#include "ops/cpu/cpu_backend.h"
#ifdef MINFER_HAVE_CUDA
#include "ops/cuda/cuda_backend.h"
#endif

namespace minfer {

bool cuda_available() {
#ifdef MINFER_HAVE_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> create_backend(std::string_view device, int n_threads) {
  if (device == "cpu") return std::make_unique<CpuBackend>(n_threads);
  if (device == "auto") return cuda_available() ? create_backend("cuda", n_threads) : create_backend("cpu", n_threads);
  if (device.substr(0, 4) == "cuda") {
#ifdef MINFER_HAVE_CUDA
    int index = 0;
    if (device.size() > 5 && device[4] == ':') index = std::stoi(std::string(device.substr(5)));
    if (cuda::device_count() <= index)
      throw std::runtime_error(fmt::format("--device {}: no such CUDA device ({} found)", device, cuda::device_count()));
    return std::make_unique<CudaBackend>(index);
#else
    throw std::runtime_error(fmt::format("--device {}: this build has no CUDA backend (nvcc was not found when it was configured, or -DMINFER_CUDA=OFF)", device));
#endif
  }
  throw std::invalid_argument(fmt::format("unknown device '{}' (cpu, cuda, cuda:N, auto)", device));
}

}  // namespace minfer
