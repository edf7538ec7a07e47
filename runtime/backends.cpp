#include "runtime/backends.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ops/cpu/cpu_backend.h"
#ifdef MINFER_HAVE_CUDA
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/nccl_collective.h"
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
    const int index = cuda_device_index(device);
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

int cuda_device_index(std::string_view device) {
  const auto bad = [&] { return std::invalid_argument(fmt::format("unknown device '{}' (cpu, cuda, cuda:N, auto)", device)); };
  if (device == "cuda") return 0;
  if (device.substr(0, 5) != "cuda:" || device.size() == 5 || device.size() > 9) throw bad();
  int index = 0;
  for (char c : device.substr(5)) {
    if (c < '0' || c > '9') throw bad();
    index = index * 10 + (c - '0');
  }
  return index;
}

std::shared_ptr<Collective> create_group(const std::vector<std::string>& devices) {
  if (devices.empty()) throw std::invalid_argument("a tensor-parallel group needs at least one device");
  const std::string list = fmt::format("{}", fmt::join(devices, ","));
  int n_cpu = 0;
  std::vector<int> gpus;
  for (const std::string& d : devices) {
    const std::string resolved = d == "auto" ? (cuda_available() ? "cuda" : "cpu") : d;
    if (resolved == "cpu") ++n_cpu;
    else if (resolved.rfind("cuda", 0) == 0) gpus.push_back(cuda_device_index(resolved));
    else throw std::invalid_argument(fmt::format("unknown device '{}' (cpu, cuda, cuda:N, auto)", d));
  }
  const int n = static_cast<int>(devices.size());
  if (n_cpu == n) return std::make_shared<HostCollective>(n);
  if (n_cpu > 0)
    throw std::invalid_argument(fmt::format("-sm tensor over --device {}: the ranks must all be CPUs or all CUDA devices "
                                            "(a CPU rank and a CUDA rank have no collective in common)",
                                            list));
#ifdef MINFER_HAVE_CUDA
  for (size_t i = 0; i < gpus.size(); ++i)
    if (std::find(gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(i), gpus[i]) != gpus.begin() + static_cast<std::ptrdiff_t>(i))
      throw std::invalid_argument(fmt::format("-sm tensor over --device {}: cuda:{} is listed twice (one rank per GPU)", list, gpus[i]));
  const int count = cuda::device_count();
  const int highest = *std::max_element(gpus.begin(), gpus.end());
  if (highest >= count)
    throw std::runtime_error(fmt::format("-sm tensor over --device {}: needs {} GPUs, this machine has {} (cuda:{} does not exist)",
                                         list, n, count, highest));
  try {
    return std::make_shared<cuda::NcclCollective>(gpus);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("-sm tensor over --device {}: {}", list, e.what()));
  }
#else
  throw std::runtime_error(fmt::format("-sm tensor over --device {}: this build has no CUDA backend (nvcc was not found when "
                                       "it was configured, or -DMINFER_CUDA=OFF)",
                                       list));
#endif
}

}  // namespace minfer
