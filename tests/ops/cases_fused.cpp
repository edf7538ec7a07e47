// The fused-op hook (tests/ops/cases.h). Fused ops exist only after a backend's rewrite
// (Backend::rewrite): no builder makes them, so a case of basic ops is what reaches them. The
// fused tests build the toolkit's blocks (models/layers.h) and check both the values and which
// fused ops the rewritten graph holds: tests/cuda/test_cuda_fused.cpp (QKV, FFN_SWIGLU,
// MUL_MAT_ADD, RMS_NORM_Q8_1, MOE_SUM against the CPU running the basic ops) and tests/ops/test_fused.cpp
// (the same blocks on the CPU against double references). Here: the probes that let the coverage
// check see what a backend claims for the fused ops, made by the CUDA rewrite of a decode-sized
// decoder layer and a MoE FFN (tests/common/layer_graph.h).
#include "cases.h"
#include "common/layer_graph.h"

#ifdef MINFER_TEST_CUDA
#include "ops/cuda/cuda_backend.h"
#endif

namespace minfer::test {

void add_fused_cases(std::vector<OpCase>& /*v*/) {}

void add_fused_probes(Context& c, std::vector<Probe>& probes) {
#ifdef MINFER_TEST_CUDA
  Graph g({layer_and_moe_graph(c, 4)});
  cuda::rewrite_graph(c, g);
  for (Tensor* n : g.nodes())
    if (op_is_fused(n->op)) probes.push_back({std::string(op_name(n->op)) + " (fused, decode-sized layer)", n});
#else
  (void)c;
  (void)probes;
#endif
}

const std::vector<std::string>& covered_by_fused_cases() {
  static const std::vector<std::string> keys = {"QKV", "FFN_SWIGLU", "MUL_MAT_ADD", "RMS_NORM_Q8_1", "MOE_SUM"};
  return keys;
}

}  // namespace minfer::test
