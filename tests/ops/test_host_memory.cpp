// Backend::alloc_host (tensor/backend.h) on the CPU backend: the memory results are read back into
// every step (the runner's logits). 64-byte aligned, every byte writable, and get_tensor lands the
// tensor's bytes in it; a zero-byte request still gives a block.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "tensor/context.h"

namespace minfer {
namespace {

TEST(HostMemory, CpuAllocHostIsAlignedWritableAndTakesReadback) {
  CpuBackend be(1);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{4096}, size_t{3} << 20}) {
    std::shared_ptr<void> p = be.alloc_host(bytes);
    ASSERT_TRUE(p) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u) << bytes;
    std::memset(p.get(), 0xA5, bytes);
  }
  Context c;
  Tensor* t = c.new_tensor(DType::F32, {1000, 3});
  auto buf = allocate_tensors(c, be);
  std::vector<float> v = test::randn(3000);
  be.set_tensor(*t, v.data(), 0, v.size() * 4);
  std::shared_ptr<void> host = be.alloc_host(v.size() * 4);
  std::memset(host.get(), 0xFF, v.size() * 4);
  be.get_tensor(*t, host.get(), 0, v.size() * 4);
  EXPECT_EQ(std::memcmp(host.get(), v.data(), v.size() * 4), 0);
}

}  // namespace
}  // namespace minfer
