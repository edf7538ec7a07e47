// Backend selection by name for programs: "cpu", "cuda", or "auto" (cuda when a GPU is usable).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tensor/backend.h"

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

}  // namespace minfer
