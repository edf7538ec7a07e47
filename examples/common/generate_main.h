// The one program body behind minfer-generate and minfer-speculative.
//
// Both complete a prompt (-p, -f, --chat, --stop, --json, the sampling and model flags). With a
// draft model (--draft / --md / -md / --model-draft; required by minfer-speculative) decoding is
// speculative (runtime/speculative.h) and the program also reports acceptance, mean accepted
// length, tokens per verify pass and the depth chosen, then, unless --no-baseline, runs plain
// decoding on a fresh session with the same prompt, sampler parameters and seed, and reports its
// speed, the speedup (ratio of decode tok/s) and, greedy, whether the token ids are identical.
#pragma once

namespace minfer::examples {

struct GenerateProgram {
  const char* name;         ///< "minfer-generate"
  const char* description;  ///< the --help title
  bool draft_required;      ///< minfer-speculative: the draft model is mandatory
};

/// Parses argv and runs. Returns the exit code: 0 on success, 1 with "error: <message>" on stderr
/// for bad input (missing file, vocabulary mismatch, prompt longer than the context, ...).
/// "-md" (and "-md=PATH") is accepted as "--md", as in llama.cpp.
int generate_main(int argc, char** argv, const GenerateProgram& program);

}  // namespace minfer::examples
