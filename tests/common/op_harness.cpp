#include "common/op_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "common/test_util.h"

namespace minfer::test {

const std::vector<uint8_t>& LeafData::bytes(size_t i, const Tensor& leaf) {
  if (i >= bytes_.size()) bytes_.resize(i + 1);
  auto& b = bytes_[i];
  if (b.empty()) {
    b.resize(leaf.nbytes());
    Tensor host = leaf;
    host.data = b.data();
    host.view_src = nullptr;
    if (init_)
      init_(host);
    else
      fill_random(host);
  } else if (b.size() != leaf.nbytes()) {
    throw std::logic_error("LeafData: leaf " + std::to_string(i) + " changed size between runs");
  }
  return b;
}

OpRun prepare_op(Backend& backend, const BuildFn& build, LeafData& data, bool upload) {
  OpRun r;
  r.ctx = std::make_unique<Context>();
  r.out = build(*r.ctx);
  r.graph.add_output(r.out);
  r.leaf_buffer = allocate_tensors(*r.ctx, backend);
  r.exec = std::make_unique<Executor>(backend);
  r.exec->allocator().set_poison(true);
  r.exec->allocate(*r.ctx, r.graph);
  if (!upload) return r;
  const auto& leafs = r.graph.leafs();
  for (size_t i = 0; i < leafs.size(); ++i) {
    const auto& b = data.bytes(i, *leafs[i]);
    backend.set_tensor(*leafs[i], b.data(), 0, b.size());
  }
  return r;
}

void compute_op(Backend& backend, OpRun& r) {
  r.exec->compute(r.graph);
  backend.synchronize();
  // Read the output through a host copy of its whole span.
  std::vector<uint8_t> host(r.out->nbytes());
  backend.get_tensor(*r.out, host.data(), 0, host.size());
  Tensor h = *r.out;
  h.data = host.data();
  r.values = to_f32(h);
}

OpRun run_op(Backend& backend, const BuildFn& build, LeafData& data) {
  OpRun r = prepare_op(backend, build, data);
  compute_op(backend, r);
  return r;
}

namespace {

template <typename R>
double nmse_impl(const std::vector<float>& got, const std::vector<R>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], e = static_cast<double>(ref[i]);
    if (!std::isfinite(g) || !std::isfinite(e)) {
      if (std::isnan(g) || std::isnan(e) || g != e) return INFINITY;
      continue;
    }
    num += (g - e) * (g - e);
    den += e * e;
  }
  return den > 0 ? num / den : num;
}

template <typename R>
void expect_close_impl(const std::vector<float>& got, const std::vector<R>& ref, double max_nmse,
                       const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what << ": output size";
  const double e = nmse_impl(got, ref);
  if (e <= max_nmse) return;
  size_t worst = 0;
  double wd = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - static_cast<double>(ref[i]));
    if (d > wd) {
      wd = d;
      worst = i;
    }
  }
  ADD_FAILURE() << what << ": nmse " << e << " > " << max_nmse << "; worst at " << worst << ": got " << got[worst]
                << " expected " << static_cast<double>(ref[worst]) << " (seed " << seed() << ")";
}

}  // namespace

double nmse(const std::vector<float>& got, const std::vector<double>& ref) { return nmse_impl(got, ref); }
double nmse(const std::vector<float>& got, const std::vector<float>& ref) { return nmse_impl(got, ref); }

void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double max_nmse,
                  const std::string& what) {
  expect_close_impl(got, ref, max_nmse, what);
}
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double max_nmse,
                  const std::string& what) {
  expect_close_impl(got, ref, max_nmse, what);
}

double tolerance_for(DType t) {
  switch (t) {
    case DType::F32: return 1e-9;
    case DType::F16: return 1e-6;
    case DType::BF16: return 1e-4;
    case DType::Q8_0: case DType::Q8_1: case DType::Q8_K: return 1e-4;
    default: return 5e-4;
  }
}

}  // namespace minfer::test
