// The CUDA backend itself: behaviour without a device, transfers, fill, allocation failures with
// a clear message, bad runtime values reported as OpErrors (the backend stays usable), and
// CUDA-graph replay of a decode step whose positions change between replays. Op results are
// checked by the op cases (tests/ops/test_backend_ops.cpp, which also lists the ops and dtypes
// CUDA has kernels for: Coverage.cuda).
#include <gtest/gtest.h>

#include <cstdio>
#include <cmath>
#include <cstring>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace minfer::test {
namespace {

TEST(CudaBackendBasics, DeviceCountNeverThrowsAndBadDeviceIsAClearError) {
  const int n = cuda::device_count();
  EXPECT_GE(n, 0);
  try {
    CudaBackend b(n + 3);
    FAIL() << "constructed a backend on a missing device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(CudaBackendBasics, HugeAllocationIsOutOfMemoryErrorWithMessage) {
  MINFER_REQUIRE_GPU();
  try {
    auto b = gpu()->alloc_buffer(size_t{1} << 50);  // 1 PiB
    FAIL() << "allocated 1 PiB";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    std::printf("[ oom ] %s\n", m.c_str());
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("1125899906842624 bytes"), std::string::npos) << m;
  }
  // Still usable.
  auto b = gpu()->alloc_buffer(1 << 20);
  EXPECT_EQ(b->size(), size_t{1} << 20);
}

TEST(CudaBackendBasics, TransfersFillAndRangeChecks) {
  MINFER_REQUIRE_GPU();
  Context c;
  Tensor* t = c.new_tensor(DType::F32, {1 << 20, 40});  // 160 MiB: the chunked, pinned path
  auto buf = allocate_tensors(c, *gpu());
  std::vector<float> v = randn(static_cast<size_t>(t->nelements()));
  gpu()->set_tensor(*t, v.data(), 0, v.size() * 4);
  std::vector<float> back(v.size());
  gpu()->get_tensor(*t, back.data(), 0, back.size() * 4);
  EXPECT_EQ(std::memcmp(v.data(), back.data(), v.size() * 4), 0);
  // Partial ranges.
  float part[3];
  gpu()->get_tensor(*t, part, 4 * 1000, sizeof(part));
  EXPECT_EQ(part[0], v[1000]);
  EXPECT_EQ(part[2], v[1002]);
  EXPECT_THROW(gpu()->get_tensor(*t, part, t->nbytes() - 4, 8), std::out_of_range);
  // fill poisons every byte.
  buf->fill(0xFF);
  gpu()->get_tensor(*t, part, 0, sizeof(part));
  EXPECT_TRUE(std::isnan(part[0]));
}

// alloc_host() memory (pinned) takes one DMA: the same bytes as the staged path, at an offset
// and over a whole 160 MiB tensor, into memory poisoned first.
TEST(CudaBackendBasics, ReadbackIntoPinnedHostMemory) {
  MINFER_REQUIRE_GPU();
  Context c;
  Tensor* t = c.new_tensor(DType::F32, {1 << 20, 40});
  auto buf = allocate_tensors(c, *gpu());
  std::vector<float> v = randn(static_cast<size_t>(t->nelements()));
  gpu()->set_tensor(*t, v.data(), 0, v.size() * 4);
  std::shared_ptr<void> pinned = gpu()->alloc_host(v.size() * 4);
  ASSERT_TRUE(pinned);
  auto* p = static_cast<float*>(pinned.get());
  std::memset(p, 0xFF, v.size() * 4);
  gpu()->get_tensor(*t, p, 0, v.size() * 4);
  EXPECT_EQ(std::memcmp(v.data(), p, v.size() * 4), 0);
  std::memset(p, 0xFF, 64);
  gpu()->get_tensor(*t, p + 1, 4 * 777, 4 * 5);  // (an unaligned destination inside the block)
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p[1 + i], v[777 + static_cast<size_t>(i)]);
  EXPECT_TRUE(std::isnan(p[0]));
  EXPECT_TRUE(std::isnan(p[6]));
}


TEST(CudaBackendErrors, GetRowsOutOfRangeIdIsAnOpError) {
  MINFER_REQUIRE_GPU();
  LeafData data([&](Tensor& leaf) {
    if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 11;
    else fill_random(leaf);
  });
  try {
    run_op(*gpu(), [&](Context& c) {
      return ops::get_rows(c, c.new_tensor(DType::F32, {8, 11}), c.new_tensor(DType::I32, {1}));
    }, data);
    FAIL() << "no error";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("id 11"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GET_ROWS"), std::string::npos) << e.what();
  }
  // The backend is usable afterwards.
  LeafData ok([](Tensor& leaf) {
    if (leaf.type != DType::I32) return fill_random(leaf);
    for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, 10));
  });
  compare_cpu_cuda([&](Context& c) {
    return ops::get_rows(c, c.new_tensor(DType::F32, {8, 11}), c.new_tensor(DType::I32, {3}));
  }, ok, 0, "get_rows after an error");
}

TEST(CudaBackendErrors, PositionPastTheCacheIsAnOpError) {
  MINFER_REQUIRE_GPU();
  auto pos8 = [] {
    return LeafData([&](Tensor& leaf) {
      if (leaf.type == DType::I32) static_cast<int32_t*>(leaf.data)[0] = 8;
      else fill_random(leaf);
    });
  };
  LeafData data = pos8(), data2 = pos8();
  EXPECT_THROW(run_op(*gpu(), [&](Context& c) {
    return ops::kv_store(c, c.new_tensor(DType::F16, {32, 1, 8}), c.new_tensor(DType::F32, {32, 1, 1}),
                         c.new_tensor(DType::I32, {1}));
  }, data), OpError);
  EXPECT_THROW(run_op(*gpu(), [&](Context& c) {
    Tensor* k = c.new_tensor(DType::F16, {32, 1, 8});
    Tensor* i = c.new_tensor(DType::I32, {1});
    return ops::attention(c, c.new_tensor(DType::F32, {32, 2, 1}), k, k, i, i, c.new_tensor(DType::I32, {1, 8}), 1, 1.0f);
  }, data2), OpError);  // position 8 of a table row of 1 block of 1
}

TEST(CudaBackendErrors, BadExpertIdIsAnOpError) {
  MINFER_REQUIRE_GPU();
  for (DType wt : {DType::Q4_K, DType::F16}) {
    LeafData data([](Tensor& leaf) {
      if (leaf.type != DType::I32) return fill_random(leaf);
      auto* p = static_cast<int32_t*>(leaf.data);
      for (int64_t i = 0; i < leaf.nelements(); ++i) p[i] = static_cast<int32_t>(i % 4);
      p[3] = 4;
    });
    try {
      run_op(*gpu(), [&](Context& c) {
        return ops::mul_mat_id(c, c.new_tensor(wt, {256, 8, 4}), c.new_tensor(DType::I32, {2, 3}),
                               c.new_tensor(DType::F32, {256, 1, 3}));
      }, data);
      FAIL() << "no error";
    } catch (const OpError& e) {
      EXPECT_NE(std::string(e.what()).find("MUL_MAT_ID: expert id 4 outside [0, 4)"), std::string::npos) << e.what();
    }
  }
  LeafData ok([](Tensor& leaf) {  // the backend is usable afterwards
    if (leaf.type != DType::I32) return fill_random(leaf);
    for (int64_t i = 0; i < leaf.nelements(); ++i) static_cast<int32_t*>(leaf.data)[i] = static_cast<int32_t>(rand_int(0, 3));
  });
  compare_cpu_cuda([](Context& c) {
    return ops::mul_mat_id(c, c.new_tensor(DType::Q8_0, {64, 8, 4}), c.new_tensor(DType::I32, {2, 3}),
                           c.new_tensor(DType::F32, {64, 1, 3}));
  }, ok, cuda_tolerance(DType::Q8_0), "mul_mat_id after an error");
}

// A decode loop: each step stores the new token's K/V at its cell and attends over the cache
// (one sequence whose blocks run backwards through the cache). The graph is identical every step (positions come from a tensor), so the CUDA backend
// captures it on the second step and replays it after; the outputs must follow the CPU.
class DecodeLoop {
 public:
  DecodeLoop(Backend& b, DType kv, int64_t d, int64_t nh, int64_t nkv, int64_t n_ctx)
      : be_(b), exec_(b), d_(d), nh_(nh), nkv_(nkv), n_ctx_(n_ctx) {
    kc_ = cache_ctx_.new_tensor(kv, {d, nkv, n_ctx});
    vc_ = cache_ctx_.new_tensor(kv, {d, nkv, n_ctx});
    table_ = cache_ctx_.new_tensor(DType::I32, {n_ctx / kBlock, 1});
    buf_ = allocate_tensors(cache_ctx_, b);
    std::vector<int32_t> t(static_cast<size_t>(n_ctx / kBlock));
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(t.size() - 1 - i);
    upload(b, *table_, t.data(), t.size() * 4);
  }
  std::vector<float> step(const std::vector<float>& q, const std::vector<float>& kv, int32_t pos) {
    Context ctx;
    Tensor* tq = ctx.new_tensor(DType::F32, {d_, nh_, 1}, "q");
    Tensor* tx = ctx.new_tensor(DType::F32, {d_, nkv_, 1}, "x");
    Tensor* tp = ctx.new_tensor(DType::I32, {1}, "pos");
    Tensor* tc = ctx.new_tensor(DType::I32, {1}, "cell");
    Tensor* ts = ctx.new_tensor(DType::I32, {1}, "seq");
    for (Tensor* t : {tq, tx, tp, tc, ts}) t->flags |= kTensorInput;
    Tensor* ks = ops::kv_store(ctx, kc_, tx, tc);
    Tensor* vs = ops::kv_store(ctx, vc_, tx, tc);
    Tensor* out = ops::attention(ctx, tq, ks, vs, tp, ts, table_, kBlock, 0.125f);
    Graph g({out});
    exec_.allocate(ctx, g);
    be_.set_tensor(*tq, q.data(), 0, q.size() * 4);
    be_.set_tensor(*tx, kv.data(), 0, kv.size() * 4);
    const int32_t cell = static_cast<int32_t>((n_ctx_ / kBlock - 1 - pos / kBlock) * kBlock + pos % kBlock), zero = 0;
    be_.set_tensor(*tp, &pos, 0, 4);
    be_.set_tensor(*tc, &cell, 0, 4);
    be_.set_tensor(*ts, &zero, 0, 4);
    exec_.compute(g);
    std::vector<float> r(static_cast<size_t>(d_ * nh_));
    be_.get_tensor(*out, r.data(), 0, r.size() * 4);
    be_.synchronize();
    return r;
  }

 private:
  Backend& be_;
  Executor exec_;
  Context cache_ctx_;
  static constexpr int32_t kBlock = 16;
  Tensor *kc_, *vc_, *table_;
  std::unique_ptr<Buffer> buf_;
  int64_t d_, nh_, nkv_, n_ctx_;
};

TEST(CudaGraph, DecodeStepsReplayWithNewPositions) {
  MINFER_REQUIRE_GPU();
  const int64_t d = 64, nh = 4, nkv = 2, n_ctx = 64;
  for (bool graphs : {true, false}) {
    gpu()->set_graphs_enabled(graphs);
    const auto before = gpu()->stats();
    DecodeLoop c(cpu(), DType::F16, d, nh, nkv, n_ctx), g(*gpu(), DType::F16, d, nh, nkv, n_ctx);
    for (int32_t pos = 0; pos < 12; ++pos) {
      const auto q = randn(static_cast<size_t>(d * nh)), kv = randn(static_cast<size_t>(d * nkv));
      // The f16 cache's decode attention runs on the tensor cores (q and P rounded to f16).
      expect_close(g.step(q, kv, pos), c.step(q, kv, pos), 2e-6, fmt::format("decode step {} graphs={}", pos, graphs));
    }
    const auto after = gpu()->stats();
    if (graphs) {
      EXPECT_EQ(after.graph_captures - before.graph_captures, 1u);
      EXPECT_GE(after.graph_replays - before.graph_replays, 10u);
    } else {
      EXPECT_EQ(after.graph_replays, before.graph_replays);
    }
  }
  gpu()->set_graphs_enabled(true);
}

}  // namespace
}  // namespace minfer::test
