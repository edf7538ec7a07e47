#include "model_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/test_util.h"
#include "model_fixtures.h"
#include "models/registry.h"
#include "runtime/perplexity.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer::test {

double max_rel_diff(std::span<const float> a, std::span<const float> b) {
  double md = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(b[i])) return INFINITY;
    md = std::max(md, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(a[i])));
  }
  return md / scale;
}

std::string model_case_name(const std::string& name) {
  std::string n = name;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

bool have_refs(const std::string& name) {
  return !fixture(name + "/" + name + "-f16.gguf").empty() && !fixture(name + "/refs.json").empty();
}

int32_t refs_n_ctx(const std::string& name) {
  int32_t n_ctx = 512;  // the longest prompt and its continuation (~2,500 tokens in the scaled-RoPE fixtures)
  for (const RefCase& rc : load_refs(name)) n_ctx = std::max(n_ctx, static_cast<int32_t>(rc.ids.size() + 32 + 255) / 256 * 256);
  return n_ctx;
}

void check_model_refs(Backend& backend, const std::string& name, DType kv_type, const std::string& label) {
  auto file = open_fixture(name + "/" + name + "-f16.gguf");
  ASSERT_TRUE(file) << "fixtures for " << name;
  auto model = models::load(file, backend);
  SessionParams sp;
  sp.n_ctx = refs_n_ctx(name);
  sp.kv_type = kv_type;
  Session s(*model, backend, sp);
  check_session_refs(s, name, label);
}

void check_session_refs(Session& s, const std::string& name, const std::string& label) {
  const DType kv_type = s.kv().type();
  // qwen2-yarn-s's YaRN magnitude (1.14 on q and k, 1.30 on the scores) and 2,500-token prompt
  // make it more sensitive to the f16 rounding of K/V: measured up to 1.9e-2 (f32 cache: 7.5e-4).
  // llama-s's 2,529-token prompt likewise: 1.8e-2 with an f16 cache (f32 cache: 4.0e-4);
  // qwen3moe-s's 2,527-token prompt 4: 1.27e-2 (f32 cache: 2.3e-4).
  const bool long_prompt = name == "qwen2-yarn-s" || name == "llama-s" || name == "qwen3moe-s";
  const double tol = kv_type == DType::F32 ? 1e-3 : long_prompt ? 3e-2 : 1e-2;
  auto refs = load_refs(name);
  ASSERT_FALSE(refs.empty()) << "fixtures for " << name;
  const std::string tag = label + " " + name + " kv " + std::string(dtype_name(kv_type));
  double worst = 0;
  for (size_t ci = 0; ci < refs.size(); ++ci) {
    const RefCase& rc = refs[ci];
    ASSERT_EQ(rc.vocab, s.n_vocab());
    s.reset();
    auto logits = s.eval(rc.ids, /*all_logits=*/true);
    double md = 0;
    for (int32_t row = rc.row_begin; row < rc.row_end; ++row)
      for (int32_t v = 0; v < rc.vocab; ++v) {
        const float got = logits[static_cast<size_t>(row) * static_cast<size_t>(rc.vocab) + static_cast<size_t>(v)];
        const float ref = rc.logits[static_cast<size_t>(row - rc.row_begin) * static_cast<size_t>(rc.vocab) + static_cast<size_t>(v)];
        ASSERT_TRUE(std::isfinite(got)) << tag << " case " << ci << " row " << row << " token " << v;
        md = std::max(md, static_cast<double>(std::abs(got - ref)));
      }
    std::printf("[ %s ] case %zu: %zu prompt tokens, logits max |diff| vs HF = %.3g\n", tag.c_str(), ci, rc.ids.size(), md);
    worst = std::max(worst, md);
    EXPECT_LT(md, tol) << tag << " case " << ci;
    // Greedy continuation: argmax, one token at a time through the decode path.
    std::vector<int32_t> got;
    std::vector<float> last(logits.end() - rc.vocab, logits.end());
    for (int i = 0; i < 32; ++i) {
      const int32_t id = argmax(last);
      got.push_back(id);
      if (i == 31) break;
      const int32_t one[1] = {id};
      auto l = s.eval(one);
      last.assign(l.begin(), l.end());
    }
    EXPECT_EQ(got, rc.greedy32) << tag << " case " << ci << ": greedy continuation differs";
  }
  std::printf("[ %s ] worst logits max |diff| over %zu cases = %.3g\n", tag.c_str(), refs.size(), worst);
}

void PrintTo(const PplCase& c, std::ostream* os) { *os << c.file << " -c " << c.n_ctx; }

std::string ppl_case_name(const PplCase& c) {
  std::string n = c.file;
  n = model_case_name(n.substr(n.find('/') + 1));
  return c.n_ctx == 256 ? n : n + "_c" + std::to_string(c.n_ctx);
}

const std::vector<PplCase> kPplCases = {
    {"qwen2-s/qwen2-s-f16.gguf", 45.0255},    {"qwen2-s/qwen2-s-Q4_K_M.gguf", 45.9957},
    {"qwen2-s/qwen2-s-Q5_K_M.gguf", 45.3998}, {"qwen3-s/qwen3-s-Q4_K_M.gguf", 46.8323},
    {"qwen3-xs/qwen3-xs-f16.gguf", 42.1421},  {"qwen3-xs/qwen3-xs-Q8_0.gguf", 42.1562},
    {"qwen3-xs/qwen3-xs-Q4_0.gguf", 44.3368}, {"qwen3-xs/qwen3-xs-Q5_1.gguf", 42.6234},
    // YaRN factor 4 over an original context of 512: -c 2048 runs positions far past it.
    {"qwen2-yarn-s/qwen2-yarn-s-f16.gguf", 109.7840},
    {"qwen2-yarn-s/qwen2-yarn-s-Q4_K_M.gguf", 113.4690},
    {"qwen2-yarn-s/qwen2-yarn-s-f16.gguf", 5850.08, 2048, 20},
    {"qwen2-yarn-s/qwen2-yarn-s-Q4_K_M.gguf", 5922.01, 2048, 20},
    // Llama 3 frequency factors over an original context of 256; BOS at every chunk's start.
    {"llama-s/llama-s-f16.gguf", 113.8586},
    {"llama-s/llama-s-Q4_K_M.gguf", 120.3381},
    {"llama-s/llama-s-f16.gguf", 6379.41, 2048, 20},
    {"llama-s/llama-s-Q4_K_M.gguf", 6404.61, 2048, 20},
    {"qwen3moe-s/qwen3moe-s-f16.gguf", 58.0634},
    {"qwen3moe-s/qwen3moe-s-Q4_K_M.gguf", 58.8238},
    {"qwen3moe-s/qwen3moe-s-f16.gguf", 724.28, 2048, 20},
};

bool have_ppl_fixture(const PplCase& c) { return !fixture(c.file).empty() && !fixture("text/python-val.txt").empty(); }

void check_perplexity(Backend& backend, const PplCase& c, const std::string& label) {
  auto file = open_fixture(c.file);
  ASSERT_TRUE(file) << c.file;
  std::ifstream in(fixture("text/python-val.txt"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  // llama-perplexity's tokens: BOS first when the vocabulary asks for it, and again at the
  // start of every chunk (perplexity()'s bos_id).
  auto tokens = tok.encode(ss.str(), /*parse_special=*/false, tok.add_bos_default());
  auto model = models::load(file, backend);
  // llama.cpp's default batch: 512 tokens (two -c 256 chunks a pass), a whole -c 2048 chunk.
  ModelRunner runner(*model, backend, perplexity_runner_params(c.n_ctx, std::max(512, c.n_ctx), DType::F16));
  auto r = perplexity(runner, tokens, c.n_ctx, c.n_chunks, nullptr, tok.add_bos_default() ? tok.bos_id() : -1);
  std::printf("[ %s %s -c %d ] PPL = %.4f +/- %.5f over %d chunks (llama.cpp %.4f, diff %+.3f %%)\n", label.c_str(),
              c.file, c.n_ctx, r.ppl, r.ppl_stderr, r.n_chunks, c.llama_ppl, 100.0 * (r.ppl / c.llama_ppl - 1.0));
  EXPECT_EQ(r.n_chunks, c.n_chunks);
  EXPECT_NEAR(r.ppl / c.llama_ppl, 1.0, 0.005);
}

}  // namespace minfer::test
