// Backend selection by name for programs: "cpu", "cuda", or "auto" (cuda when a GPU is usable).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/backend.h"
#include "tensor/collective.h"

namespace minfer {

/// True when this build has the CUDA backend and a CUDA device is present.
bool cuda_available();

/// Settings of the backend create_backend() makes; each applies to the backends that have it.
struct BackendOptions {
  int n_threads = 0;         ///< CPU: worker threads (<= 0: all hardware threads)
  bool cuda_graphs = true;   ///< CUDA: CudaOptions::graphs
  bool fusion = true;        ///< CUDA: CudaOptions::fusion
  bool cuda_profile = false; ///< CUDA: CudaOptions::profile
};

/// Creates the backend `device` ("cpu", "cuda", "cuda:N", "auto") with `options`. Throws
/// std::invalid_argument for an unknown name and std::runtime_error when CUDA is asked for but
/// not built or no device is present.
std::unique_ptr<Backend> create_backend(std::string_view device, const BackendOptions& options = {});

/// The device index of "cuda" (0) or "cuda:N". Throws std::invalid_argument for anything else
/// ("cuda:x", "cuda:-1", "cudax").
int cuda_device_index(std::string_view device);

/// The tensor-parallel group whose rank r is `devices[r]` (names as create_backend takes them;
/// "auto" is resolved first): a HostCollective when every rank is "cpu", a cuda::NcclCollective
/// over the devices when every rank is CUDA (docs/tensor-parallel.md). Throws
/// std::invalid_argument for an empty list, a mix of CPU and CUDA ranks, a CUDA device listed
/// twice or an unknown name; std::runtime_error when CUDA ranks are asked for and this build has
/// no CUDA backend or no nccl.h, when fewer GPUs exist than are listed, when NCCL's library cannot
/// be loaded (it is loaded here, at run time: what was tried and the fix), or when NCCL fails (its
/// message). Call it before create_backend for the ranks: NCCL's settings are fixed by the first
/// communicator of the process (NCCL_NVLS_ENABLE=0, cuda::prepare_nccl_environment).
std::shared_ptr<Collective> create_group(const std::vector<std::string>& devices);

}  // namespace minfer
