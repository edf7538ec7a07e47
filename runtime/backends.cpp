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

std::unique_ptr<Backend> create_backend(std::string_view device, const BackendOptions& options) {
  if (device == "cpu") return std::make_unique<CpuBackend>(options.n_threads);
  if (device == "auto") return create_backend(cuda_available() ? "cuda" : "cpu", options);
  if (device.substr(0, 4) == "cuda") {
#ifdef MINFER_HAVE_CUDA
    int index = 0;
    if (device.size() > 5 && device[4] == ':') index = std::stoi(std::string(device.substr(5)));
    if (cuda::device_count() <= index)
      throw std::runtime_error(fmt::format("--device {}: no such CUDA device ({} found)", device, cuda::device_count()));
    CudaOptions o;
    o.graphs = options.cuda_graphs;
    o.fusion = options.fusion;
    o.profile = options.cuda_profile;
    return std::make_unique<CudaBackend>(index, o);
#else
    throw std::runtime_error(fmt::format("--device {}: this build has no CUDA backend (nvcc was not found when it was configured, or -DMINFER_CUDA=OFF)", device));
#endif
  }
  throw std::invalid_argument(fmt::format("unknown device '{}' (cpu, cuda, cuda:N, auto)", device));
}

}  // namespace minfer
