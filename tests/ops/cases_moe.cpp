// Mixture-of-experts cases: top_k (order, ties, NaN/inf/-0, strided rows) and mul_mat_id for every
// weight dtype x f32/f16 activations at decode and prefill sizes, with repeated and unused
// experts, against a double loop and against mul_mat of each expert's slice in the same graph
// (bit for bit where the backend promises it).
#include <cmath>
#include <cstring>
#include <limits>

#include "cases.h"

namespace minfer::test {
namespace {

// The reference order, written as selection: rank r takes the best index not yet taken, scanning
// indices upwards and replacing only on a strictly better value (so ties keep the lower index);
// NaN ranks above every number.
std::vector<int32_t> ref_top_k(const std::vector<double>& v, int64_t k) {
  std::vector<bool> taken(v.size(), false);
  std::vector<int32_t> out;
  for (int64_t r = 0; r < k; ++r) {
    int64_t best = -1;
    for (size_t i = 0; i < v.size(); ++i) {
      if (taken[i]) continue;
      if (best < 0) {
        best = static_cast<int64_t>(i);
        continue;
      }
      const double a = v[i], c = v[static_cast<size_t>(best)];
      const bool better = std::isnan(c) ? false : std::isnan(a) ? true : a > c;
      if (better) best = static_cast<int64_t>(i);
    }
    taken[static_cast<size_t>(best)] = true;
    out.push_back(static_cast<int32_t>(best));
  }
  return out;
}

// mode 0: normal values, 1: a 7-value grid (many ties), 2: the grid with NaN, +-inf and +-0.
void add_top_k(std::vector<OpCase>& v, int64_t n, int64_t rows, int32_t k, int mode, bool strided) {
  const char* modes[] = {"", "_ties", "_ties_specials"};
  v.push_back({fmt::format("top_k_n{}_k{}_rows{}{}{}", n, k, rows, modes[mode], strided ? "_strided" : ""), [=] {
    CaseRun r;
    r.init = [=](Tensor& leaf) {
      auto* p = static_cast<float*>(leaf.data);
      for (int64_t i = 0; i < leaf.nelements(); ++i) p[i] = mode == 0 ? randn(1)[0] : static_cast<float>(rand_int(-3, 3));
      if (mode == 2 && leaf.nelements() >= 8) {
        const float inf = std::numeric_limits<float>::infinity();
        p[1] = std::nanf("");
        p[3] = -inf;
        p[5] = inf;
        p[6] = -0.0f;
        p[7] = 0.0f;
        if (leaf.nelements() > n + 2) p[n + 2] = std::nanf("");
      }
    };
    r.build = [=](Context& c) {
      Tensor* x = strided ? transpose(c, c.new_tensor(DType::F32, {rows, n})) : c.new_tensor(DType::F32, {n, rows});
      return Built{ops::top_k(c, x, k), {x}};
    };
    r.reference = [=](const Inputs& in) {
      const Nd X(in[0]);
      std::vector<double> e;
      for (int64_t i1 = 0; i1 < rows; ++i1) {
        std::vector<double> row;
        for (int64_t i0 = 0; i0 < n; ++i0) row.push_back(X.at(i0, i1));
        for (int32_t id : ref_top_k(row, k)) e.push_back(id);
      }
      return e;
    };
    return r;  // exact ids
  }});
}

void top_k_cases(std::vector<OpCase>& v) {
  for (int64_t n : {8, 33, 64, 65, 128, 256, 257, 4097})
    for (int32_t k : {1, 2, 8})
      for (int mode = 0; mode < 3; ++mode)
        for (bool strided : {false, true}) add_top_k(v, n, 5, k, mode, strided);
  add_top_k(v, 8, 3, 8, 2, false);  // k = n: a full sort
  add_top_k(v, 1, 4, 1, 0, false);
}

// Expert ids with the cases that matter: token 0 selects one expert in every slot (repeats), the
// last expert is never selected (an expert no token uses), the rest are random.
InitFn moe_init(int64_t n_expert) {
  return [n_expert](Tensor& leaf) {
    if (leaf.type != DType::I32) return fill_random(leaf);
    auto* p = static_cast<int32_t*>(leaf.data);
    const int64_t k = leaf.ne[0];
    const auto e0 = static_cast<int32_t>(rand_int(0, n_expert - 2));
    for (int64_t i = 0; i < leaf.nelements(); ++i) p[i] = i < k ? e0 : static_cast<int32_t>(rand_int(0, n_expert - 2));
  };
}

struct MoeShape {
  const char* name;
  int64_t M, n_expert, k, n_act, n_tokens;
};

// Output [M, k + n_expert * n_act, T]: per token the op's k slots, then mul_mat of every expert's
// 2-D slice over all activation rows. Reference: both from a double loop over dequantized weights
// and activations rounded through the weight's vec_dot_type; check: each (token, slot) equals the
// mul_mat of its expert and activation row bit for bit (mul_mat_id's definition), except where
// float weights take another summation order (CPU f32 x f32: Eigen's GEMM; device float weights).
void add_mul_mat_id(std::vector<OpCase>& v, DType wt, DType at, const MoeShape& s) {
  v.push_back({fmt::format("mul_mat_id_{}_{}_{}", dn(wt), dn(at), s.name), [=] {
    const int64_t K = dtype_block_size(wt) == 256 ? 512 : 96;
    const int64_t M = s.M, E = s.n_expert, k = s.k, n_act = s.n_act, T = s.n_tokens;
    const int64_t W = k + E * n_act;  // output rows per token
    CaseRun r;
    r.what = fmt::format("mul_mat_id {} x {} K={} M={} experts={} k={} n_act={} tokens={}", dn(wt), dn(at), K, M, E, k,
                         n_act, T);
    r.init = moe_init(E);
    r.build = [=](Context& c) {
      Tensor* as = c.new_tensor(wt, {K, M, E});
      Tensor* ids = c.new_tensor(DType::I32, {k, T});
      Tensor* b = c.new_tensor(at, {K, n_act, T});
      Tensor* out = ops::mul_mat_id(c, as, ids, b);
      for (int64_t e = 0; e < E; ++e) {
        Tensor* slice = view(c, as, {K, M}, {as->nb[1]}, static_cast<size_t>(e) * as->nb[2]);
        out = ops::concat(c, out, ops::mul_mat(c, slice, b), 1);
      }
      return Built{out, {as, ids, b}};
    };
    r.reference = [=](const Inputs& in) {
      const Nd A(in[0]);
      Nd B(in[2]);
      round_activations(B, wt);
      const auto id = ints(in[1]);
      auto dot = [&](int64_t m, int64_t ex, int64_t a, int64_t t) {
        double acc = 0;
        for (int64_t i = 0; i < K; ++i) acc += A.at(i, m, ex) * B.at(i, a, t);
        return acc;
      };
      std::vector<double> e;
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < k; ++j)
          for (int64_t m = 0; m < M; ++m) e.push_back(dot(m, id[static_cast<size_t>(j + k * t)], j % n_act, t));
        for (int64_t ex = 0; ex < E; ++ex)
          for (int64_t a = 0; a < n_act; ++a)
            for (int64_t m = 0; m < M; ++m) e.push_back(dot(m, ex, a, t));
      }
      return e;
    };
    r.tol = 1e-10;
    r.tol_device = device_tol(dtype_is_quantized(wt) ? 5e-4 : wt == DType::F32 ? 1e-10 : 1e-8, 1e-10);
    const std::string what = r.what;
    r.check = [=](const std::vector<float>& got, const Inputs& in, const Backend& backend) {
      ASSERT_EQ(got.size(), static_cast<size_t>(M * W * T));
      const auto id = ints(in[1]);
      std::vector<float> slots, per_expert;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) {
          const int64_t ex = id[static_cast<size_t>(j + k * t)];
          for (int64_t m = 0; m < M; ++m) {
            slots.push_back(got[static_cast<size_t>((t * W + j) * M + m)]);
            per_expert.push_back(got[static_cast<size_t>((t * W + k + ex * n_act + j % n_act) * M + m)]);
          }
        }
      // A device groups the pairs of a batch past its batch-invariant rows by expert (CUDA: tensor-core
      // tiles), whose sums round differently from the matvec mul_mat runs on each slice here.
      const bool bitwise = backend.is_host() ? !(wt == DType::F32 && at == DType::F32)
                                             : dtype_is_quantized(wt) && T <= backend.batch_invariant_rows();
      if (bitwise) {
        size_t diff = 0;
        for (size_t i = 0; i < slots.size(); ++i) diff += std::memcmp(&slots[i], &per_expert[i], 4) != 0;
        EXPECT_EQ(diff, 0u) << what << " on " << backend.name()
                            << ": values differ from mul_mat of the expert's slice (seed " << seed() << ")";
      } else {
        expect_close(slots, per_expert, backend.is_host() ? 1e-12 : dtype_is_quantized(wt) ? 1e-9 : 1e-10,
                     what + " vs mul_mat per expert on " + std::string(backend.name()));
      }
    };
    return r;
  }});
}

void mul_mat_id_cases(std::vector<OpCase>& v) {
  const MoeShape shapes[] = {
      {"decode_t1", 33, 5, 2, 1, 1},          // one token
      {"prefill_t7", 33, 5, 2, 1, 7},         // one activation row per token
      {"per_slot_rows_t7", 33, 5, 3, 3, 7},   // one row per slot (the down projection)
      {"small_m7_t1", 7, 4, 2, 1, 1},
      {"k8_of_9_t2", 16, 9, 8, 8, 2},         // k = 8 of 9 experts
      {"k8_of_9_m64_t3", 64, 9, 8, 8, 3},
      {"e16_k8_t70", 37, 16, 8, 1, 70},       // a prefill batch
      {"per_slot_rows_t300", 16, 4, 3, 3, 300},
      {"e32_k4_m130_t9", 130, 32, 4, 1, 9},    // just past the decode rows, weight rows past one 64-row block
      {"e8_k2_t200", 40, 8, 2, 1, 200},        // ~50 pairs per expert: one expert past one 64-pair tile
  };
  for (DType wt : kWeightTypes)
    for (DType at : {DType::F32, DType::F16})
      for (const MoeShape& s : shapes) add_mul_mat_id(v, wt, at, s);
}

}  // namespace

void add_moe_cases(std::vector<OpCase>& v) {
  top_k_cases(v);
  mul_mat_id_cases(v);
}

}  // namespace minfer::test
