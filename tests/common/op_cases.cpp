#include "common/op_cases.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "ops/ops.h"

namespace minfer::test {
namespace {

// The sources each basic op reads (later non-null sources are ordering dependencies only).
int sources_read(Op op) {
  switch (op) {
    case Op::CPY: case Op::SCALE: case Op::SILU: case Op::ARGMAX: case Op::TOP_K: return 1;
    case Op::GET_ROWS: case Op::ADD: case Op::MUL: case Op::RMS_NORM: case Op::MUL_MAT: case Op::SOFT_MAX:
    case Op::SWIGLU: case Op::CONCAT: return 2;
    case Op::ROPE: case Op::KV_STORE: case Op::MUL_MAT_ID: return 3;
    case Op::ATTENTION: return 6;
    default: return kMaxSrc;  // fused and future ops: every source
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::string coverage_key(const Tensor& node) {
  const int n = sources_read(node.op);
  int last = -1;
  for (int i = 0; i < n; ++i)
    if (node.src[static_cast<size_t>(i)]) last = i;
  std::string s = std::string(op_name(node.op)) + "(";
  for (int i = 0; i <= last; ++i) {
    const Tensor* t = node.src[static_cast<size_t>(i)];
    s += (i ? "," : "") + std::string(t ? dtype_name(t->type) : "-");
  }
  return s + ") -> " + std::string(dtype_name(node.type));
}

Tensor host_input(const OpRun& r, LeafData& data, const Tensor* t) {
  const Tensor* root = t->view_src ? t->view_src : t;
  while (root->view_src) root = root->view_src;
  const auto& leafs = r.graph.leafs();
  for (size_t i = 0; i < leafs.size(); ++i) {
    if (leafs[i] != root) continue;
    const auto& bytes = data.bytes(i, *root);
    Tensor h = *t;
    const auto off = static_cast<const char*>(t->data) - static_cast<const char*>(root->data);
    h.data = const_cast<uint8_t*>(bytes.data()) + off;
    h.view_src = nullptr;
    h.view_offs = 0;
    return h;
  }
  throw std::logic_error("op case: reference input " + describe(*t) + " is not (a view of) a leaf of the graph");
}

void run_case(Backend& registered, const OpCase& c) {
  CaseRun r = c.make();
  std::unique_ptr<Backend> other = r.variant ? r.variant(registered) : nullptr;
  Backend& backend = other ? *other : registered;
  Built built;
  LeafData data(r.init);
  OpRun run = prepare_op(backend, [&](Context& ctx) {
    built = r.build(ctx);
    return built.out;
  }, data);
  std::vector<std::string> missing;
  for (const Tensor* n : run.graph.nodes())
    if (!op_is_view(n->op) && !backend.supports_op(*n)) missing.push_back(coverage_key(*n));
  if (!missing.empty()) {
    if (backend.is_host()) {
      ADD_FAILURE() << c.name << ": the " << backend.name() << " backend has no kernel for " << join(missing);
      return;
    }
    GTEST_SKIP() << backend.name() << " has no kernel for " << join(missing);
  }
  compute_op(backend, run);
  Inputs in;
  for (const Tensor* t : built.in) in.push_back(host_input(run, data, t));
  const std::vector<double> expected = r.reference(in);
  const double tol = backend.is_host() || r.tol_device < 0 ? r.tol : r.tol_device;
  if (std::getenv("MINFER_OP_CASE_NMSE"))  // margins: every case's nmse against its tolerance
    std::printf("[ nmse ] %s %s %.3g tol %.3g\n", std::string(backend.name()).c_str(), c.name.c_str(),
                nmse(run.values, expected), tol);
  expect_close(run.values, expected, tol,
               fmt::format("{} on {}{}{}", c.name, backend.name(), r.what.empty() ? "" : ": ", r.what));
  if (r.check) r.check(run.values, in, backend);
}

std::vector<std::string> case_node_keys(Backend& registered, const OpCase& c) {
  CaseRun r = c.make();
  std::unique_ptr<Backend> other = r.variant ? r.variant(registered) : nullptr;
  Backend& backend = other ? *other : registered;
  LeafData data(r.init);
  OpRun run = prepare_op(backend, [&](Context& ctx) { return r.build(ctx).out; }, data, /*upload=*/false);
  std::vector<std::string> keys;
  for (const Tensor* n : run.graph.nodes())
    if (!op_is_view(n->op)) keys.push_back(coverage_key(*n));
  return keys;
}

std::vector<std::string> case_built_keys(const OpCase& c) {
  CaseRun r = c.make();
  Context ctx;
  Graph g;
  g.add_output(r.build(ctx).out);
  std::vector<std::string> keys;
  for (const Tensor* n : g.nodes())
    if (!op_is_view(n->op)) keys.push_back(coverage_key(*n));
  return keys;
}

namespace {

const DType kStorageTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                               DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                               DType::Q4_K, DType::Q5_K, DType::Q6_K};
const DType kCastTargets[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q8_1,
                              DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                              DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
const DType kActs[] = {DType::F32, DType::F16};

}  // namespace

std::vector<Probe> op_probes(Context& c) {
  std::vector<Probe> p;
  // A probe the builders reject is not a combination anyone can run: skipped.
  auto add = [&p](std::string what, const std::function<Tensor*()>& f) {
    try {
      p.push_back({std::move(what), f()});
    } catch (const OpError&) {
    }
  };
  auto t = [&c](DType type, std::initializer_list<int64_t> ne) { return c.new_tensor(type, ne); };
  Tensor* pos = t(DType::I32, {4});
  for (DType w : kStorageTypes) {
    const std::string wn(dtype_name(w));
    add("GET_ROWS " + wn, [&] { return ops::get_rows(c, t(w, {256, 8}), pos); });
    for (DType a : kActs) {
      add(fmt::format("MUL_MAT {} x {}", wn, dtype_name(a)), [&] { return ops::mul_mat(c, t(w, {256, 8}), t(a, {256, 3})); });
      add(fmt::format("MUL_MAT_ID {} x {}", wn, dtype_name(a)), [&] {
        return ops::mul_mat_id(c, t(w, {256, 8, 4}), t(DType::I32, {2, 3}), t(a, {256, 1, 3}));
      });
    }
    // Every storage type decodes to the float types and to q8_0 (what a cache or a cast needs).
    for (DType to : {DType::F32, DType::F16, DType::BF16, DType::Q8_0})
      add(fmt::format("CPY {} -> {}", wn, dtype_name(to)), [&] { return ops::cast(c, t(w, {256, 2}), to); });
  }
  // The float types encode to every cast target.
  for (DType from : {DType::F32, DType::F16, DType::BF16})
    for (DType to : kCastTargets)
      add(fmt::format("CPY {} -> {}", dtype_name(from), dtype_name(to)), [&] { return ops::cast(c, t(from, {256, 2}), to); });
  add("CPY q4_K -> q4_K (raw rows)", [&] { return ops::cast(c, t(DType::Q4_K, {256, 2}), DType::Q4_K); });
  add("GET_ROWS 3-D table", [&] { return ops::get_rows(c, t(DType::F32, {1, 8, 3}), t(DType::I32, {2, 3})); });
  add("GET_ROWS i32", [&] { return ops::get_rows(c, t(DType::I32, {1, 8}), pos); });
  add("TOP_K", [&] { return ops::top_k(c, t(DType::F32, {8, 4}), 2); });
  add("ARGMAX", [&] { return ops::argmax(c, t(DType::F32, {64, 4})); });
  add("ALL_REDUCE", [&] { return ops::all_reduce(c, t(DType::F32, {64, 4})); });
  add("ALL_GATHER", [&] { return ops::all_gather(c, t(DType::F32, {64, 4}), 1); });
  for (DType a : kActs) {
    const std::string an(dtype_name(a));
    add("SCALE " + an, [&] { return ops::scale(c, t(a, {64, 4}), 2.0f); });
    add("SILU " + an, [&] { return ops::silu(c, t(a, {64, 4})); });
    for (DType b : kActs) {
      const std::string ab = an + " " + std::string(dtype_name(b));
      add("ADD " + ab, [&] { return ops::add(c, t(a, {64, 4}), t(b, {64})); });
      add("MUL " + ab, [&] { return ops::mul(c, t(a, {64, 4}), t(b, {64})); });
      add("SWIGLU " + ab, [&] { return ops::swiglu(c, t(a, {64, 4}), t(b, {64, 4})); });
      add("CONCAT " + ab, [&] { return ops::concat(c, t(a, {64, 4}), t(b, {64, 2}), 1); });
      add("RMS_NORM " + ab, [&] { return ops::rms_norm(c, t(a, {64, 4}), 1e-6f, t(b, {64})); });
    }
    add("RMS_NORM " + an, [&] { return ops::rms_norm(c, t(a, {64, 4}), 1e-6f); });
  }
  add("SOFT_MAX", [&] { return ops::soft_max(c, t(DType::F32, {8, 4}), 1.0f); });
  add("SOFT_MAX causal", [&] { return ops::soft_max(c, t(DType::F32, {8, 4}), 1.0f, pos); });
  add("ROPE", [&] { return ops::rope(c, t(DType::F32, {64, 4, 4}), pos, ops::RopeParams{}); });
  add("ROPE freq_factors", [&] { return ops::rope(c, t(DType::F32, {64, 4, 4}), pos, ops::RopeParams{}, t(DType::F32, {32})); });
  for (DType kv : {DType::F32, DType::F16, DType::Q8_0}) {
    const std::string kn(dtype_name(kv));
    Tensor* cache = t(kv, {64, 2, 16});
    add("KV_STORE " + kn, [&] { return ops::kv_store(c, cache, t(DType::F32, {64, 2, 4}), pos); });
    add("ATTENTION " + kn, [&] {
      return ops::attention(c, t(DType::F32, {64, 4, 4}), cache, cache, pos, pos, t(DType::I32, {4, 4}), 4, 0.1f);
    });
  }
  return p;
}

}  // namespace minfer::test
