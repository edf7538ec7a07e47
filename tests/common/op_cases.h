// The op cases: one list of op test cases, each run on every backend against a double-precision
// reference (the shape of ggml's test-backend-ops). docs/testing.md says how to add one.
//
// A case is a name and a `make` function. Every run calls `make` once, which draws the case's
// random parameters and returns a CaseRun: how to build the graph (public op builders), how to
// fill its leaves (optional; default fill_random), the reference computed in double from host
// copies of the inputs the run was given, and the tolerance (nmse, op_harness.h). Every run draws
// fresh inputs (MINFER_TEST_SEED pins them), the arena is poisoned with NaN, NaN never passes, and
// no expected value comes from the code under test.
//
// The runner (run_case) builds and allocates the graph through an Executor on the backend, so
// the nodes it checks and counts are the ones the backend runs (Executor::allocate may rewrite
// fused nodes); a device backend without a kernel for some node skips the case visibly.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/op_harness.h"
#include "common/ref.h"

namespace minfer::test {

/// What one build made: the output, and the tensors the reference reads (leaves, or views of
/// leaves), in the order the reference gets their host copies.
struct Built {
  Tensor* out = nullptr;
  std::vector<Tensor*> in;
};

/// Host copies of Built::in (same shapes and strides, data on the host).
using Inputs = std::vector<Tensor>;

/// One instance of a case.
struct CaseRun {
  std::function<Built(Context&)> build;
  InitFn init;  ///< fills a host leaf; nullptr: fill_random
  /// The expected output in logical order, in double.
  std::function<std::vector<double>(const Inputs& in)> reference;
  double tol = 0;          ///< max nmse on the host (CPU) backend
  double tol_device = -1;  ///< max nmse on a device backend; < 0: tol
  /// Optional checks beyond the reference (e.g. bit equality of two parts of the output).
  std::function<void(const std::vector<float>& got, const Inputs& in, const Backend& backend)> check;
  /// Optional: the backend to run on instead of the registered one, made from it (e.g. the same
  /// device with other options); nullptr from it means the registered one.
  std::function<std::unique_ptr<Backend>(const Backend& registered)> variant;
  std::string what;  ///< the drawn parameters, printed on failure
};

struct OpCase {
  std::string name;  ///< unique; letters, digits and '_' (a GoogleTest name)
  std::function<CaseRun()> make;
};

/// Every op case, in a fixed order (names do not depend on random draws: ctest runs each test in
/// its own process).
const std::vector<OpCase>& op_cases();

/// Runs `c` on `backend` with GoogleTest checks (skips when a device backend lacks a kernel).
void run_case(Backend& backend, const OpCase& c);

/// The coverage keys of the nodes `backend` would run for one instance of `c`: built and
/// allocated through an Executor, not computed.
std::vector<std::string> case_node_keys(Backend& backend, const OpCase& c);
/// The coverage keys of one instance of `c` as built, before any backend lowers or rewrites it
/// (for a backend that cannot run here).
std::vector<std::string> case_built_keys(const OpCase& c);

/// "(op, dtype)" key of a node: the op and the dtypes of the sources it reads, then the output's,
/// e.g. "MUL_MAT(q4_K,f32) -> f32"; "-" for an absent optional source before a present one.
std::string coverage_key(const Tensor& node);

/// One probe node per (op, dtype) combination the op builders accept, for every op but the views
/// and the fused ops (see the fused hook in tests/ops/cases.h).
struct Probe {
  std::string what;
  Tensor* node;
};
std::vector<Probe> op_probes(Context& ctx);

/// Host copy of `t` (a leaf or a view of a leaf of `r.graph`) over the bytes `data` gave the run.
Tensor host_input(const OpRun& r, LeafData& data, const Tensor* t);

}  // namespace minfer::test
