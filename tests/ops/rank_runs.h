// The collectives' op tests: one graph run on every rank of a group of CPU backends at once,
// one thread per rank (HostCollective).
#pragma once

#include <functional>
#include <vector>

#include "common/op_harness.h"

namespace minfer::test {

/// Each rank's input: fresh random values in [-4, 4), different per rank.
std::vector<std::vector<float>> rank_inputs(int n_ranks, size_t n);

/// Runs `build` on every rank's single-thread CPU backend at once (all joined to one
/// HostCollective); rank r's leaves are filled by fill(r, leaf). Returns each rank's output
/// values; rethrows the first rank's error after every thread has ended.
std::vector<std::vector<float>> run_ranks(int n_ranks, const BuildFn& build, const std::function<void(int, Tensor&)>& fill);

}  // namespace minfer::test
