// NcclCollective in a build without NCCL (ops/cuda/CMakeLists.txt did not find it): no group can
// be made, so no CUDA backend ever joins one and the other members are never reached.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "ops/cuda/nccl_collective.h"

namespace minfer::cuda {

bool nccl_available() { return false; }

void prepare_nccl_environment() {}

struct NcclImpl {};

NcclCollective::NcclCollective(std::vector<int> devices) {
  throw std::runtime_error(fmt::format("tensor parallelism over cuda:{} needs NCCL, and this build has none (it was not "
                                       "found when minfer was configured: install NCCL, e.g. libnccl-dev, and reconfigure)",
                                       fmt::join(devices, ",cuda:")));
}

NcclCollective::~NcclCollective() = default;

namespace {
[[noreturn]] void unreachable() { throw std::logic_error("NcclCollective: this build has no NCCL"); }
}  // namespace

int NcclCollective::n_ranks() const { return 0; }
int NcclCollective::device(int) const { unreachable(); }
void NcclCollective::all_reduce_sum(int, float*, size_t) { unreachable(); }
void NcclCollective::all_gather(int, const float*, size_t, float*) { unreachable(); }
void NcclCollective::queue_all_reduce_sum(int, const float*, float*, size_t, CUstream_st*) { unreachable(); }
void NcclCollective::queue_all_gather(int, const float*, size_t, float*, CUstream_st*) { unreachable(); }
void NcclCollective::synchronize(int, CUstream_st*) { unreachable(); }
void NcclCollective::abort() {}
bool NcclCollective::aborted() const { return false; }

}  // namespace minfer::cuda
