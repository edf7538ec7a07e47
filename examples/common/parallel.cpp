#include "common/parallel.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/scheduler.h"

namespace minfer::examples {

std::vector<std::string> prompt_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

int run_parallel(const Loaded& L, const SessionParams& sparams, const ParallelRun& run) {
  RunnerParams rp = sparams;
  rp.n_seq_max = run.n_parallel;
  const auto runner = L.runner(rp);
  Scheduler sched(*runner, *L.tok, {.n_batch = 0, .n_parallel = run.n_parallel});
  const uint64_t seed = Sampler(run.sampling).seed();  // resolves a random seed once
  std::vector<RequestId> ids;
  for (size_t i = 0; i < run.ids.size(); ++i) {
    Request r;
    r.prompt = run.ids[i];
    r.params = run.params;
    r.sampling = run.sampling;
    r.sampling.seed = seed + i;
    ids.push_back(sched.submit(std::move(r)));
  }
  const auto t0 = std::chrono::steady_clock::now();
  sched.run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestResult res = sched.take(ids[i]);
    const GenerateResult& g = res.choices[0];
    if (run.json) {
      all.push_back({{"prompt", run.prompts[i]}, {"prompt_ids", g.prompt_ids}, {"ids", g.ids}, {"text", g.text},
                     {"stop_reason", g.stop_reason}, {"seed", seed + i}, {"error", res.error}});
    } else {
      std::printf("--- %zu ---\n%s%s\n", i + 1, run.show_prompt ? run.prompts[i].c_str() : "", g.text.c_str());
    }
  }
  const SchedulerStats& st = sched.stats();
  if (run.json) {
    std::puts(nlohmann::json{{"results", all},
                             {"parallel", run.n_parallel},
                             {"seconds", s},
                             {"prompt_tokens", st.prompt_tokens},
                             {"generated_tokens", st.generated_tokens},
                             {"steps", st.steps}}
                  .dump()
                  .c_str());
    return 0;
  }
  std::fflush(stdout);
  std::fprintf(stderr,
               "%zu prompts, %d at a time on %s: %lld prompt + %lld generated tokens in %.2f s (%.1f tok/s generated, "
               "%lld forward passes, %lld preemptions)\n",
               ids.size(), run.n_parallel, L.device_names().c_str(),
               static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.generated_tokens), s,
               s > 0 ? static_cast<double>(st.generated_tokens) / s : 0.0, static_cast<long long>(st.steps),
               static_cast<long long>(st.preemptions));
  return 0;
}

}  // namespace minfer::examples
