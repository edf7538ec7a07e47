// mul_mat cases: every weight dtype x f32/f16 activations at the decode sizes (N <= 16: MMVQ /
// matvec on CUDA, N <= 64: the tensor-core MMQ, its f16 kernel for big Q4_K/Q6_K weights) and
// past them (GEMM), awkward K/M/N, batch broadcast, strided activations, weight row slices (wk
// inside wq|wk|wv) and CUDA's chunked dequantization.
//
// Reference: dequantized weights (exact) times the activations as the op defines them: for block
// weights, activations rounded through the weight's vec_dot_type (Q8_0 / Q8_1 / Q8_K), products
// summed in double. What remains on the CPU is f32 accumulation error; a device quantizing the
// activations its own way (q8_1) is within its tolerance of that.
#include <random>

#include "cases.h"

#ifdef MINFER_TEST_CUDA
#include "ops/cuda/cuda_backend.h"
#endif

namespace minfer::test {
namespace {

// Float inputs on a 1/4 grid in [-2, 2]: every f32 product and partial sum of these sizes is
// exact, so a 1x1 output whose terms cancel cannot fail on rounding alone (random normals could:
// nmse is relative, and one cancelling element made it 1.8e-10).
void grid_init(Tensor& leaf) {
  std::uniform_int_distribution<int> q(-8, 8);
  const int64_t k = leaf.ne[0], rows = leaf.nrows();
  std::vector<float> v(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& x : v) x = static_cast<float>(q(rng())) / 4.0f;
    quantize_row(leaf.type, v.data(), static_cast<char*>(leaf.data) + r * leaf.row_size(), k);
  }
}

// out[m, n, i2] = sum_k A[k, m, i2 / (b2 / a2)] * B[k, n, i2] in double (2-D or batched).
std::vector<double> matmul_ref(const Nd& A, Nd B, DType wt) {
  round_activations(B, wt);
  const int64_t K = A.ne[0], M = A.ne[1], a2 = A.ne[2], N = B.ne[1], b2 = B.ne[2];
  std::vector<double> e;
  e.reserve(static_cast<size_t>(M * N * b2));
  for (int64_t i2 = 0; i2 < b2; ++i2)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += A.at(k, m, i2 / (b2 / a2)) * B.at(k, n, i2);
        e.push_back(s);
      }
  return e;
}

// The tolerance a device had against the CPU for weights of `wt` (float paths run other
// summation orders or f16/bf16 splits of the activations; block paths quantize to q8_1).
double vs_cpu_tol(DType wt) {
  switch (wt) {
    case DType::F32: return 1e-10;
    case DType::F16: case DType::BF16: return 1e-8;
    default: return 5e-4;
  }
}

struct Mm {
  DType wt, at;
  int64_t K, M, N, a2 = 1, b2 = 1;
  bool grid = false;
  // The nmse of a handful of outputs spreads widely (7 values: a chi-squared of 7 degrees of
  // freedom exceeds 3x its mean about once in a hundred draws): such cases scale the tolerance.
  double tol_scale = 1;
};

void add_mm(std::vector<OpCase>& v, const std::string& name, Mm s) {
  v.push_back({name, [=] {
    CaseRun r;
    if (s.grid) r.init = grid_init;
    r.what = fmt::format("mul_mat {} x {} K={} M={} N={} batch {}/{}", dn(s.wt), dn(s.at), s.K, s.M, s.N, s.a2, s.b2);
    r.build = [=](Context& c) {
      Tensor* a = c.new_tensor(s.wt, {s.K, s.M, s.a2});
      Tensor* b = c.new_tensor(s.at, {s.K, s.N, s.b2});
      return Built{ops::mul_mat(c, a, b), {a, b}};
    };
    r.reference = [=](const Inputs& in) { return matmul_ref(Nd(in[0]), Nd(in[1]), s.wt); };
    r.tol = 1e-10;
    r.tol_device = device_tol(vs_cpu_tol(s.wt) * s.tol_scale, 1e-10);
    return r;
  }});
}

}  // namespace

void add_matmul_cases(std::vector<OpCase>& v) {
  for (DType wt : kWeightTypes) {
    const int64_t K = dtype_block_size(wt) == 256 ? 512 : 96;
    for (DType at : {DType::F32, DType::F16})
      for (int64_t N : {1, 2, 7, 8, 9, 16, 17, 33, 64, 65})
        add_mm(v, fmt::format("mul_mat_{}_{}_n{}", dn(wt), dn(at), N), {wt, at, K, 37, N});
    add_mm(v, fmt::format("mul_mat_{}_decode_m7", dn(wt)), {wt, DType::F32, K, 7, 1, 1, 1, false, 4.0});
    add_mm(v, fmt::format("mul_mat_{}_m300_k{}", dn(wt), 3 * K), {wt, DType::F32, 3 * K, 300, 1});  // several units per lane
    add_mm(v, fmt::format("mul_mat_{}_batch_bcast_n3", dn(wt)), {wt, DType::F32, K, 5, 3, 2, 6});    // ratio 3
    add_mm(v, fmt::format("mul_mat_{}_batch_bcast_n12", dn(wt)), {wt, DType::F32, K, 5, 12, 2, 4});  // the GEMM path
  }
  for (int64_t K : {1, 7, 33})
    for (int64_t M : {1, 7, 33})
      for (int64_t N : {1, 7, 33})
        add_mm(v, fmt::format("mul_mat_f32_k{}_m{}_n{}", K, M, N), {DType::F32, DType::F32, K, M, N, 1, 1, true});
  for (DType wt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t N : {1, 2, 17})
      add_mm(v, fmt::format("mul_mat_{}_k4097_n{}", dn(wt), N), {wt, DType::F32, 4097, 3, N, 1, 1, true});
  add_mm(v, "mul_mat_q8_0_batch4", {DType::Q8_0, DType::F32, 64, 5, 3, 1, 4});
  // Q4_K / Q6_K weights of the shapes CUDA's MMQ runs on its f16 kernel (K >= 8192 or M >= 16384,
  // ops/cuda/k_mmq.cu) at its 9..64 rows: K split over many blocks and M past one 64-row block,
  // f16 activations, batch broadcast, and a tall weight whose K is not split. Below 9 rows the
  // Q6_K ones and the tall Q4_K one run it too (mmq_f16_every_row), on its 8-column tile.
  for (DType wt : {DType::Q4_K, DType::Q6_K}) {
    for (int64_t N : {1, 4, 8, 9, 16, 17, 33, 64})
      add_mm(v, fmt::format("mul_mat_{}_k8192_n{}", dn(wt), N), {wt, DType::F32, 8192, 100, N});
    for (int64_t N : {1, 5})
      add_mm(v, fmt::format("mul_mat_{}_m16400_n{}", dn(wt), N), {wt, DType::F32, 256, 16400, N});
    add_mm(v, fmt::format("mul_mat_{}_f16_k8192_n24", dn(wt)), {wt, DType::F16, 8192, 100, 24});
    add_mm(v, fmt::format("mul_mat_{}_k8192_batch_bcast_n9", dn(wt)), {wt, DType::F32, 8192, 5, 9, 2, 4});
    add_mm(v, fmt::format("mul_mat_{}_m16400_n9", dn(wt)), {wt, DType::F32, 256, 16400, 9});
  }

  // Weight row slices (rows 13..33, as wk inside wq|wk|wv) times transposed (strided) activations.
  for (DType wt : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K})
    for (int64_t N : {1, 5, 20})
      v.push_back({fmt::format("mul_mat_{}_row_slice_transposed_b_n{}", dn(wt), N), [=] {
        const int64_t K = wt == DType::Q4_K ? 256 : 64;
        CaseRun r;
        r.build = [=](Context& c) {
          Tensor* w = c.new_tensor(wt, {K, 50});
          Tensor* a = slice(c, w, 1, 13, 21);
          Tensor* b = transpose(c, c.new_tensor(DType::F32, {N, K}));  // [K, N] with strided rows
          return Built{ops::mul_mat(c, a, b), {a, b}};
        };
        r.reference = [=](const Inputs& in) { return matmul_ref(Nd(in[0]), Nd(in[1]), wt); };
        r.tol = 1e-10;
        r.tol_device = device_tol(vs_cpu_tol(wt), 1e-10);
        return r;
      }});
  // CUDA's GEMM path dequantizes the weights in chunks of rows: 256-wide rows, chunks of 128, 128, 44.
  for (DType wt : {DType::Q4_K, DType::Q6_K, DType::Q5_0})
    v.push_back({fmt::format("mul_mat_{}_chunked_dequant", dn(wt)), [=] {
      CaseRun r;
#ifdef MINFER_TEST_CUDA
      r.variant = [](const Backend& b) -> std::unique_ptr<Backend> {
        const auto* cuda = dynamic_cast<const CudaBackend*>(&b);
        if (!cuda) return nullptr;
        CudaOptions o = cuda->options();
        o.gemm_dequant_chunk = 33280;
        return std::make_unique<CudaBackend>(cuda->device(), o);
      };
#endif
      r.build = [=](Context& c) {
        Tensor* a = c.new_tensor(wt, {256, 300});
        Tensor* b = c.new_tensor(DType::F32, {256, 16});
        return Built{ops::mul_mat(c, a, b), {a, b}};
      };
      r.reference = [=](const Inputs& in) { return matmul_ref(Nd(in[0]), Nd(in[1]), wt); };
      r.tol = 1e-10;
      r.tol_device = device_tol(vs_cpu_tol(wt), 1e-10);
      return r;
    }});
}

}  // namespace minfer::test
