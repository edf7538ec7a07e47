// Element-wise op cases: add, mul, swiglu (every f32/f16 pair, sizes 1/7/33/4097, broadcasts,
// strided views), scale, silu, concat, get_rows from every dtype, cpy/cast, argmax.
#include <cmath>
#include <limits>

#include "cases.h"

namespace minfer::test {
namespace {

const DType kFloat[] = {DType::F32, DType::F16};

// Shapes of b broadcast over a [n, n1, 2, 1]: none, rows, columns, one row for everything.
std::array<int64_t, 4> bcast_shape(int bc, int64_t n, int64_t n1) {
  switch (bc) {
    case 1: return {n, 1, 2, 1};
    case 2: return {1, n1, 1, 1};
    case 3: return {n, 1, 1, 1};
    default: return {n, n1, 2, 1};
  }
}

void binary_cases(std::vector<OpCase>& v) {
  for (Op op : {Op::ADD, Op::MUL, Op::SWIGLU})
    for (DType ta : kFloat)
      for (DType tb : kFloat)
        for (int64_t n : kSizes)
          for (bool strided : {false, true})
            for (int bc = 0; bc < 4; ++bc) {
              if (op == Op::SWIGLU && bc > 0) continue;  // same shapes only
              std::string name = fmt::format("{}_{}_{}_n{}{}", lower_op(op), dn(ta), dn(tb), n, strided ? "_strided" : "");
              if (bc) name += "_bcast" + std::to_string(bc);
              v.push_back({name, [=] {
                const int64_t n1 = n > 64 ? 3 : 5;
                const std::array<int64_t, 4> ne{n, n1, 2, 1}, ne_b = bcast_shape(bc, n, n1);
                CaseRun r;
                r.build = [=](Context& c) {
                  Tensor* a;
                  if (strided) {  // every other row of a bigger tensor, from its second row
                    Tensor* base = c.new_tensor(ta, {n, 2 * n1, 2, 1});
                    a = view(c, base, {n, n1, 2, 1}, {2 * base->nb[1], base->nb[2], base->nb[3]}, base->nb[1]);
                  } else {
                    a = c.new_tensor(ta, ne);
                  }
                  Tensor* b = c.new_tensor(tb, ne_b);
                  Tensor* out = op == Op::ADD ? ops::add(c, a, b) : op == Op::MUL ? ops::mul(c, a, b) : ops::swiglu(c, a, b);
                  return Built{out, {a, b}};
                };
                r.reference = [=](const Inputs& in) {
                  const Nd A(in[0]), B(in[1]);
                  Nd R(ne);
                  for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                    for (int64_t i1 = 0; i1 < ne[1]; ++i1)
                      for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                        const double x = A.at(i0, i1, i2), y = B.at(i0 % ne_b[0], i1 % ne_b[1], i2 % ne_b[2]);
                        R.at(i0, i1, i2) = op == Op::ADD ? x + y : op == Op::MUL ? x * y : x / (1 + std::exp(-x)) * y;
                      }
                  return R.v;
                };
                r.tol = 1e-10;
                r.tol_device = device_tol(1e-10, 1e-10);
                return r;
              }});
            }
  // gate and up as the two halves of one [2 n_ff, N] matrix (the fused gate|up matmul's output).
  for (int64_t n_ff : {7, 96, 4097})
    v.push_back({fmt::format("swiglu_halves_n{}", n_ff), [=] {
      CaseRun r;
      r.build = [=](Context& c) {
        Tensor* gu = c.new_tensor(DType::F32, {2 * n_ff, 9});
        Tensor* g = view(c, gu, {n_ff, 9}, {gu->nb[1]}, 0);
        Tensor* u = view(c, gu, {n_ff, 9}, {gu->nb[1]}, static_cast<size_t>(n_ff) * 4);
        return Built{ops::swiglu(c, g, u), {g, u}};
      };
      r.reference = [](const Inputs& in) {
        const Nd G(in[0]), U(in[1]);
        std::vector<double> e(G.v.size());
        for (size_t i = 0; i < e.size(); ++i) e[i] = G.v[i] / (1 + std::exp(-G.v[i])) * U.v[i];
        return e;
      };
      r.tol = 1e-10;
      r.tol_device = device_tol(1e-10, 1e-10);
      return r;
    }});
}

void unary_cases(std::vector<OpCase>& v) {
  for (int64_t n : kSizes)
    for (DType t : kFloat) {
      for (bool transposed : {false, true})
        v.push_back({fmt::format("scale_{}_n{}{}", dn(t), n, transposed ? "_transposed" : ""), [=] {
          const float s = randu(1, -3, 3)[0];
          CaseRun r;
          r.what = fmt::format("s = {}", s);
          r.build = [=](Context& c) {
            Tensor* a = transposed ? transpose(c, c.new_tensor(t, {3, n})) : c.new_tensor(t, {n, 3});
            return Built{ops::scale(c, a, s), {a}};
          };
          r.reference = [=](const Inputs& in) {
            Nd A(in[0]);
            for (double& x : A.v) x *= s;
            return A.v;
          };
          r.tol = 1e-12;
          r.tol_device = device_tol(1e-12, 1e-12);
          return r;
        }});
      v.push_back({fmt::format("silu_{}_n{}", dn(t), n), [=] {
        CaseRun r;
        r.build = [=](Context& c) {
          Tensor* a = c.new_tensor(t, {n, 3});
          return Built{ops::silu(c, a), {a}};
        };
        r.reference = [](const Inputs& in) {
          Nd A(in[0]);
          for (double& x : A.v) x = x / (1 + std::exp(-x));
          return A.v;
        };
        r.tol = 1e-12;
        r.tol_device = device_tol(1e-10, 1e-12);
        return r;
      }});
    }
  for (int dim = 0; dim < 4; ++dim)
    for (DType ta : kFloat)
      for (DType tb : kFloat)
        v.push_back({fmt::format("concat_dim{}_{}_{}", dim, dn(ta), dn(tb)), [=] {
          std::array<int64_t, 4> na{5, 3, 2, 2}, nb = na;
          nb[static_cast<size_t>(dim)] = 4;
          CaseRun r;
          r.build = [=](Context& c) {
            Tensor* a = c.new_tensor(ta, na);
            Tensor* b = c.new_tensor(tb, nb);
            return Built{ops::concat(c, a, b, dim), {a, b}};
          };
          r.reference = [=](const Inputs& in) {
            const Nd A(in[0]), B(in[1]);
            auto ne = na;
            ne[static_cast<size_t>(dim)] += nb[static_cast<size_t>(dim)];
            Nd R(ne);
            for (int64_t i3 = 0; i3 < ne[3]; ++i3)
              for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < ne[1]; ++i1)
                  for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                    int64_t j[4] = {i0, i1, i2, i3};
                    if (j[dim] < na[static_cast<size_t>(dim)]) {
                      R.at(i0, i1, i2, i3) = A.at(j[0], j[1], j[2], j[3]);
                    } else {
                      j[dim] -= na[static_cast<size_t>(dim)];
                      R.at(i0, i1, i2, i3) = B.at(j[0], j[1], j[2], j[3]);
                    }
                  }
            return R.v;
          };
          return r;  // tol 0: a copy
        }});
}

void get_rows_cases(std::vector<OpCase>& v) {
  for (DType t : kWeightTypes)
    for (bool two_d : {false, true})
      v.push_back({fmt::format("get_rows_{}{}", dn(t), two_d ? "_ids2d" : ""), [=] {
        const int64_t n_embd = dtype_block_size(t) == 256 ? 512 : 64, n_rows = 37;
        CaseRun r;
        r.init = ids_below(n_rows);
        r.build = [=](Context& c) {
          Tensor* table = c.new_tensor(t, {n_embd, n_rows});
          Tensor* ids = two_d ? c.new_tensor(DType::I32, {7, 3}) : c.new_tensor(DType::I32, {33});
          return Built{ops::get_rows(c, table, ids), {table, ids}};
        };
        r.reference = [=](const Inputs& in) {
          const Nd T(in[0]);
          std::vector<double> e;
          for (int32_t id : ints(in[1]))
            for (int64_t i = 0; i < n_embd; ++i) e.push_back(T.at(i, id));
          return e;
        };
        return r;  // exact: rows decode as dequantize_row decodes them
      }});
  // An I32 table gives its rows as I32, copied (an output written as f32 bits would read back
  // as other integers). The comparison is in f32: values past 2^24 are compared rounded.
  for (bool two_d : {false, true})
    v.push_back({fmt::format("get_rows_i32{}", two_d ? "_ids2d" : ""), [=] {
      const int64_t n_embd = 3, n_rows = 37;
      CaseRun r;
      r.init = [=](Tensor& leaf) {
        auto* p = static_cast<int32_t*>(leaf.data);
        const bool table = leaf.ne[0] == n_embd;
        for (int64_t i = 0; i < leaf.nelements(); ++i)
          p[i] = static_cast<int32_t>(table ? rand_int(-(1 << 30), 1 << 30) : rand_int(0, n_rows - 1));
      };
      r.build = [=](Context& c) {
        Tensor* table = c.new_tensor(DType::I32, {n_embd, n_rows});
        Tensor* ids = two_d ? c.new_tensor(DType::I32, {7, 3}) : c.new_tensor(DType::I32, {33});
        return Built{ops::get_rows(c, table, ids), {table, ids}};
      };
      r.reference = [=](const Inputs& in) {
        const auto T = ints(in[0]);
        std::vector<double> e;
        for (int32_t id : ints(in[1]))
          for (int64_t i = 0; i < n_embd; ++i) e.push_back(static_cast<float>(T[static_cast<size_t>(id * n_embd + i)]));
        return e;
      };
      return r;  // tol 0: a copy
    }});
  // A batch of tables (MoE routing weights): row (i, j) of the output is table[:, ids[i, j], j].
  struct Batched {
    int64_t n_embd, n_rows, n, b;
  };
  for (Batched s : {Batched{3, 8, 2, 5}, Batched{1, 8, 2, 33}})
    v.push_back({fmt::format("get_rows_batched_tables_e{}_b{}", s.n_embd, s.b), [=] {
      CaseRun r;
      r.init = ids_below(s.n_rows);
      r.build = [=](Context& c) {
        Tensor* table = c.new_tensor(DType::F32, {s.n_embd, s.n_rows, s.b});
        Tensor* ids = c.new_tensor(DType::I32, {s.n, s.b});
        return Built{ops::get_rows(c, table, ids), {table, ids}};
      };
      r.reference = [=](const Inputs& in) {
        const Nd T(in[0]);
        const auto id = ints(in[1]);
        std::vector<double> e;
        for (int64_t j = 0; j < s.b; ++j)
          for (int64_t i = 0; i < s.n; ++i)
            for (int64_t k = 0; k < s.n_embd; ++k) e.push_back(T.at(k, id[static_cast<size_t>(i + s.n * j)], j));
        return e;
      };
      return r;
    }});
}

// The values a cast to `to` must give for the source values: exact for f32, nearest-even for
// f16/bf16 (written here in double); block targets are checked against the source values within
// the target's quantization error (cast_tol).
double cast_value(double x, DType to) {
  return to == DType::F16 ? round_f16(x) : to == DType::BF16 ? round_bf16(x) : x;
}

// nmse of quantizing N(0, 1) rows to each block type, with margin (dequantize(quantize(x)) vs x).
double cast_tol(DType from, DType to) {
  if (from == to || !dtype_is_quantized(to)) return 0;
  switch (to) {  // measured over 2,560 values (MINFER_OP_CASE_NMSE): about 2/3 of these or less
    case DType::Q8_0: case DType::Q8_1: return 1e-4;
    case DType::Q6_K: return 1e-3;
    case DType::Q5_0: return 3e-3;
    case DType::Q5_1: case DType::Q5_K: return 2.5e-3;
    case DType::Q4_0: return 1e-2;
    case DType::Q4_1: case DType::Q4_K: return 8e-3;
    case DType::Q3_K: return 4e-2;
    default: return 0.13;  // Q2_K
  }
}

void add_cast(std::vector<OpCase>& v, DType from, DType to) {
  v.push_back({fmt::format("cast_{}_to_{}", dn(from), dn(to)), [=] {
    CaseRun r;
    r.build = [=](Context& c) {
      Tensor* a = c.new_tensor(from, {256, 5, 2});
      return Built{ops::cast(c, a, to), {a}};
    };
    r.reference = [=](const Inputs& in) {
      Nd A(in[0]);
      for (double& x : A.v) x = cast_value(x, to);
      return A.v;
    };
    r.tol = cast_tol(from, to);
    return r;
  }});
}

void cpy_cases(std::vector<OpCase>& v) {
  // Every storage type decodes to f32/f16/bf16/q8_0; the float types encode to every block type.
  for (DType from : kWeightTypes)
    for (DType to : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) add_cast(v, from, to);
  for (DType from : {DType::F32, DType::F16, DType::BF16})
    for (DType to : {DType::Q8_1, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                     DType::Q4_K, DType::Q5_K, DType::Q6_K})
      add_cast(v, from, to);
  // A transposed (strided) source.
  for (int64_t n : kSizes)
    for (DType to : {DType::F32, DType::F16})
      v.push_back({fmt::format("cpy_transposed_f32_to_{}_n{}", dn(to), n), [=] {
        CaseRun r;
        r.build = [=](Context& c) {
          Tensor* a = transpose(c, c.new_tensor(DType::F32, {5, n}));
          return Built{ops::cast(c, a, to), {a}};
        };
        r.reference = [=](const Inputs& in) {
          Nd A(in[0]);
          for (double& x : A.v) x = cast_value(x, to);
          return A.v;
        };
        return r;
      }});
  v.push_back({"cpy_reshaping_f16_into_f32", [] {  // [12, 5] f16 into [6, 10] f32
    CaseRun r;
    r.build = [](Context& c) {
      Tensor* a = c.new_tensor(DType::F16, {12, 5});
      return Built{ops::cpy(c, a, c.new_tensor(DType::F32, {6, 10})), {a}};
    };
    r.reference = [](const Inputs& in) { return Nd(in[0]).v; };
    return r;
  }});
  v.push_back({"cpy_q4_K_rows_into_a_slice", [] {  // same-type block rows copied raw
    CaseRun r;
    r.build = [](Context& c) {
      Tensor* dst = c.new_tensor(DType::Q4_K, {256, 9});
      Tensor* a = c.new_tensor(DType::Q4_K, {256, 4});
      return Built{ops::cpy(c, a, slice(c, dst, 1, 3, 4)), {a}};
    };
    r.reference = [](const Inputs& in) { return Nd(in[0]).v; };
    return r;
  }});
  v.push_back({"cpy_strided_f32_to_q8_0", [] {  // every other row of a bigger tensor
    CaseRun r;
    r.build = [](Context& c) {
      Tensor* base = c.new_tensor(DType::F32, {64, 10});
      Tensor* a = view(c, base, {64, 5}, {2 * base->nb[1]}, 0);
      return Built{ops::cast(c, a, DType::Q8_0), {a}};
    };
    r.reference = [](const Inputs& in) { return Nd(in[0]).v; };
    r.tol = cast_tol(DType::F32, DType::Q8_0);
    return r;
  }});
}

void argmax_cases(std::vector<OpCase>& v) {
  for (int64_t n : kSizes)
    v.push_back({fmt::format("argmax_ties_nan_n{}", n), [=] {
      CaseRun r;
      r.init = [=](Tensor& leaf) {
        fill_random(leaf);
        auto* p = static_cast<float*>(leaf.data);
        if (n > 3) p[n + 3] = p[n + 1] = 100.0f;  // a tie in row 1: the lower index
        if (n > 5) p[2 * n + 5] = p[2 * n + 2] = std::numeric_limits<float>::quiet_NaN();  // row 2: the first NaN
      };
      r.build = [=](Context& c) {
        Tensor* a = c.new_tensor(DType::F32, {n, 4});
        return Built{ops::argmax(c, a), {a}};
      };
      r.reference = [=](const Inputs& in) {
        const Nd A(in[0]);
        std::vector<double> e;
        for (int64_t row = 0; row < 4; ++row) {
          int64_t best = 0, first_nan = -1;
          for (int64_t i = 0; i < n; ++i) {
            if (std::isnan(A.at(i, row)) && first_nan < 0) first_nan = i;
            if (A.at(i, row) > A.at(best, row)) best = i;
          }
          e.push_back(static_cast<double>(first_nan >= 0 ? first_nan : best));
        }
        return e;
      };
      return r;
    }});
}

// A backend in no tensor-parallel group all-reduces and all-gathers over itself alone: a
// gathering copy (groups of several ranks: tests/ops/test_all_reduce.cpp, test_all_gather.cpp).
void collective_cases(std::vector<OpCase>& v) {
  for (Op op : {Op::ALL_REDUCE, Op::ALL_GATHER})
    for (int64_t n : kSizes)
      for (bool transposed : {false, true})
        v.push_back({fmt::format("{}_alone_n{}{}", lower_op(op), n, transposed ? "_transposed" : ""), [=] {
          CaseRun r;
          r.build = [=](Context& c) {
            Tensor* a = transposed ? transpose(c, c.new_tensor(DType::F32, {3, n})) : c.new_tensor(DType::F32, {n, 3});
            return Built{op == Op::ALL_REDUCE ? ops::all_reduce(c, a) : ops::all_gather(c, a, 1), {a}};
          };
          r.reference = [](const Inputs& in) { return Nd(in[0]).v; };
          r.tol = 1e-14;  // exact
          return r;
        }});
}

}  // namespace

void add_elementwise_cases(std::vector<OpCase>& v) {
  collective_cases(v);
  binary_cases(v);
  unary_cases(v);
  get_rows_cases(v);
  cpy_cases(v);
  argmax_cases(v);
}

}  // namespace minfer::test
