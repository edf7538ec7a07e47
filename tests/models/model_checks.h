// The model checks every backend runs: the f16 fixtures against the Hugging Face references and
// the fixtures' perplexity against llama.cpp's. tests/models (CPU) and tests/cuda (GPU) call
// these with their backend.
#pragma once

#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "tensor/backend.h"

namespace minfer::test {

/// max |a - b| over max(1, max |a|); infinite when b holds a non-finite value. For logits of
/// the same model computed two ways (sharded vs unsharded sums: the same terms reordered).
double max_rel_diff(std::span<const float> a, std::span<const float> b);

/// A fixture directory name as a test-name-safe string ("qwen2-yarn-s" -> "qwen2_yarn_s").
std::string model_case_name(const std::string& name);

/// True when fixtures/<name>/<name>-f16.gguf and refs.json exist.
bool have_refs(const std::string& name);

/// Every refs.json case of `name` on `backend` with a `kv_type` KV cache: logits of the rows in
/// the reference within 1e-3 (f32 cache) or 1e-2 (f16 cache; rounding K/V to f16 moves logits by
/// a few 1e-3; 3e-2 for the ~2,500-token prompts of qwen2-yarn-s, llama-s and qwen3moe-s), the maximum printed per case, and the 32-token greedy continuation exact through
/// one-token decode steps. `label` prefixes the printed lines.
void check_model_refs(Backend& backend, const std::string& name, DType kv_type, const std::string& label);
/// The same checks on an existing session of the fixture's f16 model (its KV dtype picks the
/// tolerance; its n_ctx must be at least refs_n_ctx(name)).
void check_session_refs(Session& s, const std::string& name, const std::string& label);
/// The context the reference prompts and their 32-token continuations need.
int32_t refs_n_ctx(const std::string& name);

/// A fixture and llama.cpp's perplexity on it (fixtures README: -c 256, 100 chunks; the
/// scaled-RoPE fixtures also -c 2048, 20 chunks).
struct PplCase {
  const char* file;
  double llama_ppl;
  int32_t n_ctx = 256;
  int32_t n_chunks = 100;
};
void PrintTo(const PplCase& c, std::ostream* os);
std::string ppl_case_name(const PplCase& c);  ///< a test-name-safe name
extern const std::vector<PplCase> kPplCases;

/// True when the fixture and text/python-val.txt exist.
bool have_ppl_fixture(const PplCase& c);

/// Perplexity of the case on python-val.txt (-c n_ctx, n_chunks chunks) within 0.5 % of llama.cpp's.
void check_perplexity(Backend& backend, const PplCase& c, const std::string& label);

}  // namespace minfer::test
