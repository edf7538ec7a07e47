// minfer-generate --parallel N -f PROMPTS: every line of the file is a prompt; the Scheduler runs
// up to N of them at once (continuous batching over one paged KV cache) and the completions are
// printed in prompt order, then the aggregate throughput.
#pragma once

#include <string>
#include <vector>

#include "common/common.h"
#include "runtime/generate.h"

namespace minfer::examples {

struct ParallelRun {
  std::vector<std::string> prompts;       ///< one per line of the file, empty lines dropped
  std::vector<std::vector<int32_t>> ids;  ///< the prompts' token ids
  int n_parallel = 1;
  SamplerParams sampling;                 ///< prompt i samples with seed + i
  GenerateParams params;
  bool json = false;
  bool show_prompt = true;
};

/// Runs the prompts and prints the results. Returns the exit code (0).
int run_parallel(const Loaded& L, const SessionParams& sparams, const ParallelRun& run);

/// The non-empty lines of `text`.
std::vector<std::string> prompt_lines(const std::string& text);

}  // namespace minfer::examples
