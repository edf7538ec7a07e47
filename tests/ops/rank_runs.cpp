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
  std::vector<LeafData> data;
  for (int r = 0; r < n_ranks; ++r) {
    backends.push_back(std::make_unique<CpuBackend>(1));
    backends.back()->join(group, r);
    data.emplace_back([r, &fill](Tensor& leaf) { fill(r, leaf); });
  }
  std::vector<std::vector<float>> out(static_cast<size_t>(n_ranks));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n_ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        out[static_cast<size_t>(r)] = run_op(*backends[static_cast<size_t>(r)], build, data[static_cast<size_t>(r)]).values;
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        group->abort();  // the other ranks would wait for this one's collectives forever
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace minfer::test
