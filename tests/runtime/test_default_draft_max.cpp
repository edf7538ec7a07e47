// The default speculative depth follows the target backend's batch-invariance range
// (Backend::batch_invariant_rows): a verify batch holds the draft plus one committed token.
#include <gtest/gtest.h>

#include <stdexcept>

#include "ops/cpu/cpu_backend.h"
#include "runtime/speculative.h"

namespace minfer::test {
namespace {

// A backend that only reports its invariance range (nothing here computes on it).
class RangeOnly final : public Backend {
 public:
  explicit RangeOnly(int64_t rows) : rows_(rows) {}
  std::string_view name() const override { return "range-only"; }
  bool is_host() const override { return false; }
  std::unique_ptr<Buffer> alloc_buffer(size_t) override { throw std::logic_error("unused"); }
  void set_tensor(Tensor&, const void*, size_t, size_t) override { throw std::logic_error("unused"); }
  void get_tensor(const Tensor&, void*, size_t, size_t) override { throw std::logic_error("unused"); }
  bool supports_op(const Tensor&) const override { return false; }
  void compute(Graph&) override { throw std::logic_error("unused"); }
  int64_t batch_invariant_rows() const override { return rows_; }

 private:
  int64_t rows_;
};

TEST(DefaultDraftMax, IsTheInvariantRangeLessOneCappedAtSeven) {
  CpuBackend cpu(1);
  EXPECT_EQ(default_draft_max(cpu), 7);  // the CPU is invariant at any batch size
  EXPECT_EQ(default_draft_max(RangeOnly(8)), 7);
  EXPECT_EQ(default_draft_max(RangeOnly(5)), 4);
  EXPECT_EQ(default_draft_max(RangeOnly(2)), 1);
  EXPECT_EQ(default_draft_max(RangeOnly(1)), 1);  // speculative decoding still needs one draft token
  EXPECT_EQ(default_draft_max(RangeOnly(100)), 7);
}

}  // namespace
}  // namespace minfer::test
