// Tensor parallelism on CUDA devices of one process (ops/cuda/nccl_collective.h, NCCL): ALL_REDUCE
// and ALL_GATHER on one rank equal a copy (also replayed from a captured CUDA graph) and over
// several GPUs equal the CPU's HostCollective results; a rank that fails does not leave the
// others waiting; the fixtures split over 2 GPUs give the one-GPU logits and greedy text.
// Without a GPU the GPU tests skip visibly ("no CUDA device", "needs 2 GPUs"), and so do the
// group tests when NCCL's library cannot be loaded (the loader's message); what needs no device
// runs everywhere: the NCCL environment, the loading of NCCL's library at run time and its errors,
// the kernel table's claims, the refusals of groups that cannot be made.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <span>
#include <thread>

#include "../ops/rank_runs.h"
#include "cuda_test_util.h"
#include "model_checks.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "ops/cuda/nccl_collective.h"
#include "ops/ops.h"
#include "quantize/quantize_file.h"
#include "runtime/backends.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace minfer::test {
namespace {

using cuda::NcclCollective;

// Why no NCCL group can be made here (a build without nccl.h, or the library's loading error),
// or empty.
std::string nccl_missing() {
  if (!cuda::nccl_available()) return "this build has no NCCL (nccl.h was not found when it was configured)";
  try {
    cuda::nccl_library();
    return {};
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

#define MINFER_REQUIRE_NCCL() \
  if (const std::string why = nccl_missing(); !why.empty()) GTEST_SKIP() << why

// The GPUs a multi-GPU test uses (at most 4), or a skip.
#define MINFER_REQUIRE_GPUS(n_var)                                                                      \
  const int n_var = std::min(cuda::device_count(), 4);                                                 \
  if (n_var < 2) GTEST_SKIP() << "needs 2 GPUs (" << cuda::device_count() << " CUDA device(s) found)"; \
  MINFER_REQUIRE_NCCL()

// A fresh environment variable value for the duration of a test.
class EnvVar {
 public:
  explicit EnvVar(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
  }
  ~EnvVar() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  std::string get() const {
    const char* v = std::getenv(name_);
    return v ? v : "(unset)";
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// ---------------------------------------------------------------- everywhere (no device)

TEST(NcclEnvironment, MulticastIsForcedOffAndRuntimeConnectDefaultsOff) {
  EnvVar nvls("NCCL_NVLS_ENABLE"), connect("NCCL_RUNTIME_CONNECT");
  setenv("NCCL_NVLS_ENABLE", "1", 1);  // a user's value is overridden: multicast is never used
  unsetenv("NCCL_RUNTIME_CONNECT");
  cuda::prepare_nccl_environment();
  EXPECT_EQ(nvls.get(), "0");
  EXPECT_EQ(connect.get(), "0");
  setenv("NCCL_RUNTIME_CONNECT", "1", 1);  // this one is the user's choice
  cuda::prepare_nccl_environment();
  EXPECT_EQ(connect.get(), "1");
  EXPECT_EQ(nvls.get(), "0");
}

// NCCL is loaded at run time (dlopen), not linked: a missing library is an error that says what
// was tried and how to fix it, raised when a group is made, not when a program starts.
TEST(NcclLibrary, AMissingLibraryIsAClearError) {
  EXPECT_EQ(cuda::nccl_library_names(), (std::vector<std::string>{"libnccl.so.2", "libnccl.so"}));
  const std::vector<std::string> absent{"libminfer-no-such-nccl.so.2", "libminfer-no-such-nccl.so"};
  try {
    cuda::load_nccl_library(absent);
    FAIL() << "a library that does not exist was loaded";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    std::printf("[ nccl ] a missing library: %s\n", m.c_str());
    for (const auto& name : absent) EXPECT_NE(m.find(name), std::string::npos) << m;
    if (cuda::nccl_available()) {
      EXPECT_NE(m.find("needs NCCL, loaded at run time, and it could not be loaded"), std::string::npos) << m;
      EXPECT_NE(m.find("dlopen(\"libminfer-no-such-nccl.so.2\")"), std::string::npos) << m;  // each attempt's reason
      EXPECT_NE(m.find("LD_LIBRARY_PATH"), std::string::npos) << m;  // the fix
    } else {
      EXPECT_NE(m.find("nccl.h was not found"), std::string::npos) << m;
    }
  }
  if (!cuda::nccl_available()) return;
  // A library that loads but is not NCCL: the function it lacks is named.
  try {
    cuda::load_nccl_library({"libm.so.6"});
    FAIL() << "libm was taken for NCCL";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("\"libm.so.6\" was loaded but has no ncclGetVersion"), std::string::npos) << e.what();
  }
  const std::string why = nccl_missing();
  if (!why.empty()) GTEST_SKIP() << "NCCL's own library is not loadable here: " << why;
  // The names are tried in order: a missing first name falls through to the next.
  const cuda::NcclLibrary& lib = cuda::nccl_library();
  const auto again = cuda::load_nccl_library({"libminfer-no-such-nccl.so.2", lib.name});
  EXPECT_EQ(again.name, lib.name);
  EXPECT_EQ(again.version, lib.version);
}

TEST(NcclLibrary, TheRealLibraryLoadsWhenPresent) {
  MINFER_REQUIRE_NCCL();
  const cuda::NcclLibrary& lib = cuda::nccl_library();
  std::printf("[ nccl ] %s -> %s, version %d\n", lib.name.c_str(), lib.path.c_str(), lib.version);
  const auto& names = cuda::nccl_library_names();
  EXPECT_NE(std::find(names.begin(), names.end(), lib.name), names.end()) << lib.name;
  EXPECT_FALSE(lib.path.empty());
  EXPECT_GE(lib.version, 20000);  // 2.x, as the header (checked by the loader)
  EXPECT_EQ(&cuda::nccl_library(), &lib);  // loaded once
}

TEST(CudaCollectives, TheKernelTableClaimsTheCollectives) {
  Context c;
  Tensor* x = c.new_tensor(DType::F32, {64, 4});
  EXPECT_TRUE(cuda::op_supported(*ops::all_reduce(c, x)));
  EXPECT_TRUE(cuda::op_supported(*ops::all_reduce(c, transpose(c, x))));
  EXPECT_TRUE(cuda::op_supported(*ops::all_gather(c, x, 1)));
  // Several ranks need a group, which needs NCCL.
  EXPECT_EQ(cuda::op_supported(*ops::all_gather(c, x, 2)), cuda::nccl_available());
  // The vocabulary-parallel embedding's id maps: I32 rows.
  EXPECT_TRUE(cuda::op_supported(*ops::get_rows(c, c.new_tensor(DType::I32, {1, 8}), c.new_tensor(DType::I32, {3}))));
}

TEST(CudaGroups, GroupsThatCannotBeMadeAreRefused) {
  auto says = [](const std::function<void()>& f, const std::string& text, bool invalid_argument) {
    try {
      f();
      ADD_FAILURE() << "no error; expected '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_FALSE(invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  says([] { create_group({"cpu", "cuda:0"}); }, "must all be CPUs or all CUDA devices", true);
  says([] { create_group({"cuda:1", "cpu"}); }, "must all be CPUs or all CUDA devices", true);
  says([] { create_group({"cuda:0", "cuda"}); }, "cuda:0 is listed twice", true);
  says([] { create_group({"cuda:0", "cuda:x"}); }, "unknown device 'cuda:x'", true);
  const int n = cuda::device_count();
  std::vector<std::string> too_many;
  for (int i = 0; i <= n; ++i) too_many.push_back(fmt::format("cuda:{}", i));
  if (too_many.size() < 2) too_many.push_back("cuda:1");
  says([&] { create_group(too_many); }, fmt::format("this machine has {}", n), false);
  says([] { NcclCollective({}); }, "no CUDA device", true);
  says([] { NcclCollective({0, 0}); }, "cuda:0 is listed twice", true);
  // The devices are checked before NCCL is loaded.
  says([&] { NcclCollective({n, n + 1}); }, fmt::format("{} found", n), false);
  if (!cuda::nccl_available() && n >= 1) says([] { NcclCollective({0}); }, "nccl.h was not found", false);
  // The CPU path is unchanged.
  EXPECT_EQ(create_group({"cpu", "cpu", "cpu"})->n_ranks(), 3);
}

// ---------------------------------------------------------------- one GPU

TEST(CudaCollectives, OneRankGroupIsACopyAlsoWhenReplayed) {
  MINFER_REQUIRE_GPU();
  MINFER_REQUIRE_NCCL();
  auto group = std::make_shared<NcclCollective>(std::vector<int>{0});
  CudaBackend b(0);
  b.join(group, 0);
  for (bool gather : {false, true})
    for (bool transposed : {false, true}) {
      const std::string what = fmt::format("{}{}", gather ? "all_gather" : "all_reduce", transposed ? " transposed" : "");
      LeafData data;
      auto build = [&](Context& c) {
        Tensor* x = transposed ? transpose(c, c.new_tensor(DType::F32, {5, 37})) : c.new_tensor(DType::F32, {37, 5});
        return gather ? ops::all_gather(c, x, 1) : ops::all_reduce(c, x);
      };
      const auto alone = run_op(cpu(), build, data).values;  // the copy a backend in no group makes
      OpRun r = prepare_op(b, build, data);
      const auto before = b.stats();
      for (int i = 0; i < 3; ++i) {  // eager, captured, replayed
        compute_op(b, r);
        ASSERT_EQ(r.values.size(), alone.size()) << what;
        EXPECT_EQ(std::memcmp(r.values.data(), alone.data(), alone.size() * 4), 0) << what << ", run " << i;
      }
      EXPECT_EQ(b.stats().graph_captures - before.graph_captures, 1u) << what;
      EXPECT_GE(b.stats().graph_replays - before.graph_replays, 1u) << what;
    }
  // The host-memory forms of the collective.
  std::vector<float> v = randu(1000, -4, 4), w = v, g(1000);
  group->all_reduce_sum(0, w.data(), w.size());
  EXPECT_EQ(w, v);
  group->all_gather(0, v.data(), v.size(), g.data());
  EXPECT_EQ(g, v);
}

TEST(CudaCollectives, JoinTakesOnlyAnNcclGroupOfItsDevice) {
  MINFER_REQUIRE_GPU();
  CudaBackend b(0);
  try {
    b.join(std::make_shared<HostCollective>(1), 0);
    FAIL() << "a CUDA backend joined a HostCollective";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL group"), std::string::npos) << e.what();
  }
  EXPECT_THROW(b.join(nullptr, 0), std::invalid_argument);
  if (!nccl_missing().empty()) return;
  auto group = std::make_shared<NcclCollective>(std::vector<int>{0});
  EXPECT_THROW(b.join(group, 1), std::invalid_argument);
  // Alone, a gather over 2 ranks is not claimed; in a group of one neither.
  Context c;
  Tensor* g2 = ops::all_gather(c, c.new_tensor(DType::F32, {8, 2}), 2);
  EXPECT_FALSE(b.supports_op(*g2));
  b.join(group, 0);
  EXPECT_FALSE(b.supports_op(*g2));
  if (cuda::device_count() >= 2) {
    auto other = std::make_shared<NcclCollective>(std::vector<int>{1});
    try {
      b.join(other, 0);
      FAIL() << "cuda:0 joined as cuda:1";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("is cuda:1"), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------- several GPUs

struct GpuRanks {
  std::shared_ptr<NcclCollective> group;
  std::vector<std::unique_ptr<CudaBackend>> backends;
  explicit GpuRanks(int n) {
    std::vector<int> devices;
    for (int r = 0; r < n; ++r) devices.push_back(r);
    group = std::make_shared<NcclCollective>(devices);
    for (int r = 0; r < n; ++r) {
      backends.push_back(std::make_unique<CudaBackend>(r));
      backends.back()->join(group, r);
    }
  }
  std::vector<Backend*> ptrs() const {
    std::vector<Backend*> v;
    for (const auto& b : backends) v.push_back(b.get());
    return v;
  }
};

TEST(CudaCollectives, SeveralGpusMatchTheCpuRanks) {
  MINFER_REQUIRE_GPUS(n_gpus);
  for (int n = 2; n <= n_gpus; ++n) {
    GpuRanks gpus(n);
    for (int rows : {1, 5})
      for (bool transposed : {false, true})
        for (bool gather : {false, true}) {
          const int64_t n0 = 37;
          const std::string what = fmt::format("{} over {} GPUs, {} rows{}", gather ? "all_gather" : "all_reduce", n, rows,
                                               transposed ? ", transposed" : "");
          const auto in = rank_inputs(n, static_cast<size_t>(n0 * rows));
          auto build = [&](Context& c) {
            Tensor* x = transposed ? transpose(c, c.new_tensor(DType::F32, {rows, n0})) : c.new_tensor(DType::F32, {n0, rows});
            return gather ? ops::all_gather(c, x, n) : ops::all_reduce(c, x);
          };
          auto fill = [&](int r, Tensor& leaf) { std::memcpy(leaf.data, in[static_cast<size_t>(r)].data(), leaf.nbytes()); };
          const auto cpu_out = run_ranks(n, build, fill);
          const auto gpu_out = run_ranks_on(gpus.ptrs(), *gpus.group, build, fill);
          for (int r = 0; r < n; ++r) {
            const auto& got = gpu_out[static_cast<size_t>(r)];
            // Every rank has the same bits (NCCL computes each sum once).
            EXPECT_EQ(got, gpu_out[0]) << what << ": rank " << r << " differs from rank 0";
            // Gathers are copies, and two-rank sums are rank-order sums (a + b == b + a): exact.
            // More ranks add in NCCL's order.
            if (gather || n == 2) EXPECT_EQ(got, cpu_out[static_cast<size_t>(r)]) << what << ", rank " << r;
            else expect_close(got, cpu_out[static_cast<size_t>(r)], 1e-12, what);
          }
        }
  }
}

TEST(CudaCollectives, AFailedRankDoesNotLeaveTheOthersWaiting) {
  MINFER_REQUIRE_GPUS(n_gpus);
  (void)n_gpus;
  GpuRanks gpus(2);
  auto build = [](Context& c) { return ops::all_reduce(c, c.new_tensor(DType::F32, {1024, 4})); };
  LeafData data;
  OpRun r = prepare_op(*gpus.backends[0], build, data);
  // Rank 1 fails before its all-reduce; rank 0's NCCL kernel waits for it until the abort.
  auto waiting = std::async(std::launch::async, [&] {
    try {
      compute_op(*gpus.backends[0], r);
      return std::string("no error");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  gpus.group->abort();
  if (waiting.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "rank 0 still waits 60 s after the abort\n");
    std::_Exit(1);  // a hang is the failure; the waiting thread cannot be joined
  }
  const std::string err = waiting.get();
  EXPECT_NE(err.find("another rank of the tensor-parallel group failed"), std::string::npos) << err;
  // The group stays unusable, without hanging.
  EXPECT_THROW(compute_op(*gpus.backends[0], r), std::runtime_error);
  EXPECT_TRUE(gpus.group->aborted());
}

// qwen3-s has only a Q4_K_M file, whose 256-wide attention output a 2-way column split would cut
// inside a K-quant block: its weights widened to f16 (quantize_file) split like the f16 files.
std::shared_ptr<const gguf::File> f16_fixture(const std::string& name) {
  if (auto f = open_fixture(name + "/" + name + "-f16.gguf")) return f;
  const auto q = fixture(name + "/" + name + "-Q4_K_M.gguf");
  if (!std::filesystem::exists(q)) return nullptr;
  const auto out = std::filesystem::temp_directory_path() / fmt::format("minfer-{}-{}-f16.gguf", name, ::getpid());
  quantize::QuantizeParams p;
  p.target = quantize::parse_target("F16");
  p.allow_requantize = true;
  quantize::quantize_file(q, out, p);
  auto file = std::make_shared<const gguf::File>(out);
  std::filesystem::remove(out);  // the mapping stays valid
  return file;
}

TEST(CudaTensorParallel, FixturesOverTwoGpusMatchOneGpu) {
  MINFER_REQUIRE_GPUS(n_gpus);
  (void)n_gpus;
  for (const char* name : {"qwen2-s", "qwen3-s"}) {
    const auto refs = load_refs(name);
    auto file = f16_fixture(name);
    if (!file || refs.empty()) GTEST_SKIP() << name << " fixtures not found under " << fixtures_dir();
    CudaBackend one(0);
    auto full = models::load(file, one);
    GpuRanks gpus(2);
    std::vector<std::unique_ptr<Model>> parts;
    std::vector<const Model*> ranks;
    for (int r = 0; r < 2; ++r) {
      parts.push_back(models::load(file, *gpus.backends[static_cast<size_t>(r)], Shard{r, 2}));
      ranks.push_back(parts.back().get());
    }
    RunnerParams rp;
    rp.n_ctx = refs_n_ctx(name);
    rp.kv_type = DType::F32;
    {
      ModelRunner a(*full, one, rp), b(ranks, gpus.group, rp);
      for (size_t c = 0; c < refs.size() && c < 3; ++c) {
        Session sa(a), sb(b);
        auto la = sa.eval(refs[c].ids);
        std::vector<float> fa(la.begin(), la.end());
        auto lb = sb.eval(refs[c].ids);
        const double d = max_rel_diff(fa, lb);
        std::printf("[ cuda tp2 %s prompt %zu ] prefill logits vs one GPU: max |diff| %.3g relative\n", name, c, d);
        EXPECT_LT(d, 1e-3) << name << " prompt " << c;
        std::vector<int32_t> ga, gb;
        for (int i = 0; i < 32; ++i) {  // one-token decode steps: the captured graphs
          ga.push_back(argmax(fa));
          gb.push_back(argmax(lb));
          const int32_t ta[1] = {ga.back()}, tb[1] = {gb.back()};
          auto na = sa.eval(ta);
          fa.assign(na.begin(), na.end());
          lb = sb.eval(tb);
          EXPECT_LT(max_rel_diff(fa, lb), 1e-3) << name << " prompt " << c << " step " << i;
        }
        EXPECT_EQ(ga, gb) << name << " prompt " << c << ": greedy continuations differ";
      }
    }
    for (int r = 0; r < 2; ++r) {
      const auto s = gpus.backends[static_cast<size_t>(r)]->stats();
      std::printf("[ cuda tp2 %s rank %d ] CUDA graphs: %llu captured, %llu replays\n", name, r,
                  static_cast<unsigned long long>(s.graph_captures), static_cast<unsigned long long>(s.graph_replays));
      EXPECT_GE(s.graph_replays, 50u) << name << " rank " << r << ": decode steps were not replayed";
    }
  }
}

}  // namespace
}  // namespace minfer::test
