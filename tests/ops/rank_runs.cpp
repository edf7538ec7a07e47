#include "rank_runs.h"

#include <exception>
#include <memory>
#include <thread>

#include "common/test_util.h"
#include "ops/cpu/cpu_backend.h"
#include "tensor/collective.h"

namespace minfer::test {

std::vector<std::vector<float>> rank_inputs(int n_ranks, size_t n) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < n_ranks; ++r) in.push_back(randu(n, -4, 4));
  return in;
}

std::vector<std::vector<float>> run_ranks(int n_ranks, const BuildFn& build, const std::function<void(int, Tensor&)>& fill) {
  auto group = std::make_shared<HostCollective>(n_ranks);
  std::vector<std::unique_ptr<CpuBackend>> backends;
  std::vector<Backend*> ptrs;
  for (int r = 0; r < n_ranks; ++r) {
    backends.push_back(std::make_unique<CpuBackend>(1));
    backends.back()->join(group, r);
    ptrs.push_back(backends.back().get());
  }
  return run_ranks_on(ptrs, *group, build, fill);
}

std::vector<std::vector<float>> run_ranks_on(const std::vector<Backend*>& backends, Collective& group, const BuildFn& build,
                                             const std::function<void(int, Tensor&)>& fill) {
  const size_t n = backends.size();
  std::vector<LeafData> data;
  for (size_t r = 0; r < n; ++r) data.emplace_back([r, &fill](Tensor& leaf) { fill(static_cast<int>(r), leaf); });
  std::vector<std::vector<float>> out(n);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        out[r] = run_op(*backends[r], build, data[r]).values;
      } catch (...) {
        errors[r] = std::current_exception();
        group.abort();  // the other ranks would wait for this one's collectives forever
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace minfer::test
