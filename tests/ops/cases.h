// The families of op cases (tests/ops/cases_*.cpp) that make up op_cases(), the helpers they
// share, and the hook for the fused ops.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/ops.h"
#include "tensor/quants.h"

namespace minfer::test {

void add_elementwise_cases(std::vector<OpCase>& v);  // cases_elementwise.cpp
void add_norm_rope_cases(std::vector<OpCase>& v);    // cases_norm_rope.cpp
void add_matmul_cases(std::vector<OpCase>& v);       // cases_matmul.cpp
void add_attention_cases(std::vector<OpCase>& v);    // cases_attention.cpp
void add_moe_cases(std::vector<OpCase>& v);          // cases_moe.cpp

// ---- The fused-op hook (cases_fused.cpp) ----
// Fused ops (op_is_fused) are neither probed nor built by the basic families above: their cases
// and probes go here.
/// Cases of fused ops, run on every backend like the others.
void add_fused_cases(std::vector<OpCase>& v);
/// Probe nodes of fused ops, for the coverage check.
void add_fused_probes(Context& ctx, std::vector<Probe>& probes);
/// Coverage keys (coverage_key, e.g. "QKV(f32,q4_K,...) -> f32") or whole op names ("QKV") a
/// backend may claim without a case here because the fused tests (tests/ops/test_fused.cpp,
/// tests/cuda/test_cuda_fused.cpp) exercise them; the coverage check prints them as "covered by
/// the fused cases".
const std::vector<std::string>& covered_by_fused_cases();

// ---- Helpers ----
inline const int64_t kSizes[] = {1, 7, 33, 4097};
inline const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                     DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                     DType::Q4_K, DType::Q5_K, DType::Q6_K};

/// Lower-case op name, e.g. "mul_mat".
std::string lower_op(Op op);
inline std::string dn(DType t) { return std::string(dtype_name(t)); }

/// An init that fills I32 leaves uniformly in [0, hi) and everything else with fill_random.
InitFn ids_below(int64_t hi);

/// The device tolerance of a case whose device results used to be compared with the CPU within
/// `vs_cpu` and whose CPU results are within `cpu` of the reference: sqrt(nmse) is a distance, so
/// (sqrt(vs_cpu) + sqrt(cpu))^2 bounds it (10% margin: the two nmse denominators differ slightly).
double device_tol(double vs_cpu, double cpu);

/// B's rows rounded through the activation type the weight dtype multiplies against
/// (vec_dot_type), as mul_mat defines block-weight products.
void round_activations(Nd& B, DType weight_type);

}  // namespace minfer::test
