// The KernelContext members a probe that #includes a library kernel file needs (they live in the
// CUDA backend's .cpp files, which the probes do not link): the text of launch errors. Include
// after the library file.
#pragma once

#include <string>

#include "ops/cuda/common.h"

namespace minfer::cuda {
std::string KernelContext::where() const { return "probe"; }
}  // namespace minfer::cuda
