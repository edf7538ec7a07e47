// The collectives' op tests: one graph run on every rank of a group of backends at once, one
// thread per rank (CPU backends in a HostCollective here; tests/cuda runs CUDA ranks in an NCCL
// group through run_ranks_on).
#pragma once

#include <functional>
#include <vector>

#include "common/op_harness.h"
#include "tensor/collective.h"

namespace minfer::test {

/// Each rank's input: fresh random values in [-4, 4), different per rank.
std::vector<std::vector<float>> rank_inputs(int n_ranks, size_t n);

/// Runs `build` on every rank's single-thread CPU backend at once (all joined to one
/// HostCollective); rank r's leaves are filled by fill(r, leaf). Returns each rank's output
/// values; rethrows the first rank's error after every thread has ended.
std::vector<std::vector<float>> run_ranks(int n_ranks, const BuildFn& build, const std::function<void(int, Tensor&)>& fill);

/// The same on given backends: backends[r] joined `group` as rank r. A rank that fails aborts
/// the group (the others would wait for its collectives forever); the first error is rethrown.
std::vector<std::vector<float>> run_ranks_on(const std::vector<Backend*>& backends, Collective& group, const BuildFn& build,
                                             const std::function<void(int, Tensor&)>& fill);

}  // namespace minfer::test
