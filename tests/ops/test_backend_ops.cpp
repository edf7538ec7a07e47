// Every op case (tests/ops/cases_*.cpp) on every backend of the build, each against the case's
// double-precision reference: the CPU always, CUDA when the build has it (a visible skip, "no
// CUDA device", on a machine without a GPU). Tests are named <backend>.<case>; Coverage.<backend>
// checks that every (op, dtype) the backend claims is exercised by some case. docs/testing.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "cases.h"
#include "ops/cpu/cpu_backend.h"
#if defined(MINFER_TEST_CUDA)
#include "ops/cuda/cuda_backend.h"
#endif

namespace minfer::test {
namespace {

struct BackendEntry {
  std::string name;
  /// The backend, or nullptr where it cannot run here (then tests skip with `unavailable`).
  std::function<Backend*()> get;
  /// What the backend claims for a node (needs no device).
  std::function<bool(const Tensor&)> supports;
  std::string unavailable;
  /// Probes (Probe::what) the backend may leave unclaimed; any other unclaimed probe fails.
  std::function<bool(const std::string& what)> may_lack;
};

CpuBackend& cpu() {
  static CpuBackend b(2);
  return b;
}

const std::vector<BackendEntry>& backends() {
  static const std::vector<BackendEntry> v = [] {
    std::vector<BackendEntry> r;
    r.push_back({"cpu", [] { return static_cast<Backend*>(&cpu()); },
                 [](const Tensor& n) { return cpu().supports_op(n); }, "", [](const std::string&) { return false; }});
#if defined(MINFER_TEST_CUDA)
    r.push_back({"cuda",
                 [] {
                   static std::unique_ptr<CudaBackend> b =
                       cuda::device_count() > 0 ? std::make_unique<CudaBackend>(0) : nullptr;
                   return static_cast<Backend*>(b.get());
                 },
                 [](const Tensor& n) { return cuda::op_supported(n); }, "no CUDA device",
                 // Encoding into block types other than q8_0/q8_1 (the CPU's scale-searching
                 // quantizers): models never need it at run time.
                 [](const std::string& what) {
                   return what.rfind("CPY ", 0) == 0 && what.find("-> q") != std::string::npos &&
                          what.find("-> q8_") == std::string::npos;
                 }});
#endif
    return r;
  }();
  return v;
}

// Coverage keys a backend may claim without a case, each with the reason. Empty: every claimed
// (op, dtype) has a case.
const std::map<std::string, std::string>& allowed_gaps() {
  static const std::map<std::string, std::string> gaps = {};
  return gaps;
}

class CaseTest : public ::testing::Test {
 public:
  CaseTest(const BackendEntry& b, const OpCase& c) : b_(b), c_(c) {}
  void TestBody() override {
    Backend* backend = b_.get();
    if (!backend) GTEST_SKIP() << b_.unavailable;
    run_case(*backend, c_);
  }

 private:
  const BackendEntry& b_;
  const OpCase& c_;
};

void print_list(const std::string& title, const std::vector<std::string>& items) {
  std::printf("[ coverage ] %s (%zu)%s\n", title.c_str(), items.size(), items.empty() ? "" : ":");
  for (const auto& s : items) std::printf("[ coverage ]   %s\n", s.c_str());
}

class CoverageTest : public ::testing::Test {
 public:
  explicit CoverageTest(const BackendEntry& b) : b_(b) {}
  void TestBody() override {
    const std::string& bn = b_.name;
    // 1. What the backend claims, over one probe per (op, dtype) the builders accept.
    Context ctx;
    std::vector<Probe> probes = op_probes(ctx);
    add_fused_probes(ctx, probes);
    std::set<Op> probed;
    std::map<std::string, std::string> claimed;  // key -> probe
    std::vector<std::string> unclaimed;
    std::set<std::string> probe_keys;
    for (const Probe& p : probes) {
      probed.insert(p.node->op);
      const std::string key = coverage_key(*p.node);
      probe_keys.insert(key);
      if (b_.supports(*p.node)) {
        claimed.emplace(key, p.what);
      } else {
        unclaimed.push_back(p.what + "   " + key);
        // Fused ops are one backend's rewrite targets: another backend lacks them by design.
        EXPECT_TRUE(b_.may_lack(p.what) || op_is_fused(p.node->op))
            << bn << " has no kernel for " << p.what << " (" << key << ")";
      }
    }
    std::printf("[ coverage ] %s: %zu probes, %zu claimed (op, dtype) keys\n", bn.c_str(), probes.size(), claimed.size());
    print_list(bn + ": probes without a kernel", unclaimed);
    std::vector<std::string> fused_unprobed;
    for (int i = 0; i < kOpCount; ++i) {
      const Op op = static_cast<Op>(i);
      if (op == Op::NONE || op_is_view(op) || probed.count(op)) continue;
      if (op_is_fused(op)) fused_unprobed.emplace_back(op_name(op));
      else ADD_FAILURE() << "no coverage probe for " << op_name(op) << " (tests/common/op_cases.cpp op_probes)";
    }
    print_list("fused ops not probed yet (add_fused_probes in tests/ops/cases_fused.cpp)", fused_unprobed);

    // 2. What the cases exercise: the nodes of each case's graph after Executor::allocate.
    Backend* backend = b_.get();
    std::map<std::string, std::string> exercised;  // key -> first case
    for (const OpCase& c : op_cases()) {
      try {
        for (const std::string& k : backend ? case_node_keys(*backend, c) : case_built_keys(c)) exercised.emplace(k, c.name);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "case " << c.name << " does not build on " << bn << ": " << e.what();
      }
    }
    std::printf("[ coverage ] %s: %zu cases exercise %zu keys%s\n", bn.c_str(), op_cases().size(), exercised.size(),
                backend ? "" : " as built (no backend here: not the graphs it would run)");

    // 3. Claimed but not exercised.
    const auto& fused = covered_by_fused_cases();
    std::vector<std::string> by_fused, allowed, gaps, unprobed;
    for (const auto& [key, what] : claimed) {
      if (exercised.count(key)) continue;
      const std::string op = key.substr(0, key.find('('));
      if (std::find(fused.begin(), fused.end(), key) != fused.end() || std::find(fused.begin(), fused.end(), op) != fused.end())
        by_fused.push_back(key);
      else if (auto it = allowed_gaps().find(key); it != allowed_gaps().end()) allowed.push_back(key + "   (" + it->second + ")");
      else gaps.push_back(key + "   (probe: " + what + ")");
    }
    for (const auto& [key, c] : exercised)
      if (!probe_keys.count(key)) unprobed.push_back(key + "   (e.g. " + c + ")");
    print_list(bn + ": covered by the fused cases", by_fused);
    print_list(bn + ": allowed gaps", allowed);
    print_list(bn + ": UNCOVERED (claimed, no case)", gaps);
    print_list(bn + ": exercised keys no probe asks for", unprobed);
    if (!backend)  // the graphs as built, not after the backend's Executor::allocate: informational
      GTEST_SKIP() << b_.unavailable << ": the claimed keys were matched against the cases' graphs as built only";
    EXPECT_TRUE(gaps.empty()) << bn << " claims " << gaps.size()
                              << " (op, dtype) keys no case exercises (listed above); add cases in tests/ops/cases_*.cpp";
  }

 private:
  const BackendEntry& b_;
};

const bool registered = [] {
  for (const BackendEntry& b : backends()) {
    for (const OpCase& c : op_cases())
      ::testing::RegisterTest(b.name.c_str(), c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [&b, &c]() -> ::testing::Test* { return new CaseTest(b, c); });
    ::testing::RegisterTest("Coverage", b.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [&b]() -> ::testing::Test* { return new CoverageTest(b); });
  }
  return true;
}();

}  // namespace
}  // namespace minfer::test
