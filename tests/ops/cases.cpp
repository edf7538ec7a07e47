// op_cases(): every family's cases in one list, and the helpers of tests/ops/cases.h.
#include "cases.h"

#include <cctype>
#include <cmath>
#include <set>
#include <stdexcept>

namespace minfer::test {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> v;
    add_elementwise_cases(v);
    add_norm_rope_cases(v);
    add_matmul_cases(v);
    add_attention_cases(v);
    add_moe_cases(v);
    add_fused_cases(v);
    std::set<std::string> names;
    for (const OpCase& c : v) {
      if (!names.insert(c.name).second) throw std::logic_error("op cases: duplicate name " + c.name);
      for (char ch : c.name)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_')
          throw std::logic_error("op cases: bad character in name " + c.name);
    }
    return v;
  }();
  return cases;
}

std::string lower_op(Op op) {
  std::string s(op_name(op));
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

InitFn ids_below(int64_t hi) {
  return [hi](Tensor& leaf) {
    if (leaf.type != DType::I32) return fill_random(leaf);
    for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, hi - 1));
  };
}

double device_tol(double vs_cpu, double cpu) {
  const double r = std::sqrt(vs_cpu) + std::sqrt(cpu);
  return 1.1 * r * r;
}

void round_activations(Nd& B, DType weight_type) {
  const DType vt = vec_dot_type(weight_type);
  if (vt == DType::F32) return;
  const auto K = static_cast<size_t>(B.ne[0]);
  std::vector<float> row(K), back(K);
  std::vector<uint8_t> q(dtype_row_size(vt, B.ne[0]));
  for (size_t r = 0; r < B.v.size() / K; ++r) {
    for (size_t k = 0; k < K; ++k) row[k] = static_cast<float>(B.v[r * K + k]);
    quantize_row_activations(vt, row.data(), q.data(), B.ne[0]);
    dequantize_row(vt, q.data(), back.data(), B.ne[0]);
    for (size_t k = 0; k < K; ++k) B.v[r * K + k] = back[k];
  }
}

}  // namespace minfer::test
