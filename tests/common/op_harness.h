// The backend op harness: build an op graph, run it on a backend with fresh random inputs and a
// poisoned arena, read the output back; compare with a dtype-aware tolerance. The op cases
// (common/op_cases.h, docs/testing.md) run on it against double references; the fused and
// batch-invariance tests also compare two runs.
//
//   Tensor *a, *b;
//   auto build = [&](Context& c) { a = c.new_tensor(DType::F32, {33, 7}); ...; return ops::add(c, a, b); };
//   LeafData data;                               // random inputs, generated once, shared by runs
//   auto ref = run_op(cpu, build, data);         // a, b now point at the CPU run's host tensors
//   auto got = run_op(cuda, build, data);
//   expect_close(ref.values, got.values, 1e-7, "add");
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/executor.h"
#include "tensor/backend.h"
#include "tensor/context.h"
#include "tensor/graph.h"

namespace minfer::test {

using BuildFn = std::function<Tensor*(Context&)>;
/// Fills a host leaf (data points at host memory) with its input values.
using InitFn = std::function<void(Tensor& leaf)>;

/// Input bytes per leaf (in graph leaf order), generated on first use and reused by later runs so
/// that every backend sees the same inputs.
class LeafData {
 public:
  explicit LeafData(InitFn init = nullptr) : init_(std::move(init)) {}
  /// Bytes of leaf i (shape and dtype taken from `leaf`), generating them if needed.
  const std::vector<uint8_t>& bytes(size_t i, const Tensor& leaf);

 private:
  InitFn init_;
  std::vector<std::vector<uint8_t>> bytes_;
};

struct OpRun {
  std::unique_ptr<Context> ctx;
  Graph graph;
  Tensor* out = nullptr;
  std::unique_ptr<Buffer> leaf_buffer;
  std::unique_ptr<Executor> exec;
  std::vector<float> values;  ///< the output read back, f32 in logical order
};

/// Builds, allocates (arena poisoned with NaN), uploads the leaves, computes, reads back `out`.
OpRun run_op(Backend& backend, const BuildFn& build, LeafData& data);

/// run_op's first half: builds, allocates the leaves and (through an Executor, arena poisoned)
/// the graph, which is then the graph the backend runs (Executor::allocate may rewrite nodes);
/// uploads the leaves when `upload`. compute_op is the second half.
OpRun prepare_op(Backend& backend, const BuildFn& build, LeafData& data, bool upload = true);
/// Computes a prepared run and reads back `out` into r.values.
void compute_op(Backend& backend, OpRun& r);

/// Normalized mean squared error sum((a-b)^2) / sum(b^2); +inf when any value is NaN/inf in only
/// one of them or NaN anywhere.
double nmse(const std::vector<float>& got, const std::vector<double>& ref);
double nmse(const std::vector<float>& got, const std::vector<float>& ref);

/// GoogleTest check: same size, no NaN, nmse <= max_nmse; the message shows what/nmse/worst index.
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double max_nmse,
                  const std::string& what);
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double max_nmse,
                  const std::string& what);

/// Default tolerances by the dtype that limits precision (ggml test-backend-ops style).
double tolerance_for(DType limiting);

}  // namespace minfer::test
