// Backend selection by name for programs: "cpu", "cuda", or "auto" (cuda when a GPU is usable).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tensor/backend.h"

namespace minfer {

/// True when this build has the CUDA backend and a CUDA device is present.
bool cuda_available();

/// Creates the backend `device` ("cpu", "cuda", "cuda:N", "auto"). n_threads applies to the CPU
/// backend (<= 0: all hardware threads). Throws std::invalid_argument for an unknown name and
/// std::runtime_error when CUDA is asked for but not built or no device is present.
std::unique_ptr<Backend> create_backend(std::string_view device, int n_threads = 0);

}  // namespace minfer
