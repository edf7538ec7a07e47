// minfer-perplexity: llama.cpp's perplexity method (non-overlapping chunks of -c tokens, each
// scored on its second half). Prints a final line `PPL = <value> +/- <stderr>`.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/common.h"
#include "runtime/perplexity.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-perplexity: perplexity of a model over a text file"};
    examples::ModelArgs margs;
    margs.n_ctx = 512;
    std::string file;
    int chunks = -1;
    examples::add_model_flags(app, margs);
    app.add_option("-f,--file", file, "text file to score")->required();
    app.add_option("--chunks", chunks, "max chunks to score (-1: all)")->check([](const std::string& v) {
      const long n = std::strtol(v.c_str(), nullptr, 10);
      return n == -1 || n >= 1 ? std::string() : "--chunks " + v + ": give -1 (all) or a count >= 1";
    });
    // A chunk scores n_ctx/2 - 1 tokens, so a chunk needs at least 4; 0 is the model's context.
    app.get_option("--ctx-size")->check([](const std::string& v) -> std::string {
      const long n = std::strtol(v.c_str(), nullptr, 10);
      return n == 0 || (n >= 4 && n <= (1 << 24)) ? "" : "-c must be 0 (the model's context) or in [4, 16777216]";
    });
    examples::LlamaArgs av(argc, argv);
    MINFER_PARSE(app, av.argc(), av.argv());

    const std::string text = examples::read_text_file(file, "-f");
    auto L = examples::load_model(margs);
    const auto t0 = std::chrono::steady_clock::now();
    auto tokens = L.tok->encode(text, /*parse_special=*/false, L.tok->add_bos_default());
    auto sp = examples::session_params(margs);
    sp.n_ctx = std::min(ModelRunner::resolve_n_ctx(*L.model, sp), sp.n_ctx > 0 ? sp.n_ctx : std::max(1, L.model->hparams().n_ctx_train));  // -c 0: the model's context (capped by memory)
    const auto runner = L.runner(perplexity_runner_params(sp.n_ctx, std::max(sp.n_batch, sp.n_ctx), sp.kv_type));
    std::fprintf(stderr, "%s: %zu tokens, n_ctx %d, scoring %d chunks on %s\n", file.c_str(), tokens.size(), sp.n_ctx,
                 chunks > 0 ? std::min<int>(chunks, static_cast<int>(tokens.size() / static_cast<size_t>(sp.n_ctx)))
                            : static_cast<int>(tokens.size() / static_cast<size_t>(sp.n_ctx)),
                 L.device_names().c_str());
    auto r = perplexity(*runner, tokens, sp.n_ctx, chunks, [](int32_t c, double ppl) {
      std::fprintf(stderr, "[%d]%.4f ", c + 1, ppl);
      std::fflush(stderr);
    }, L.tok->add_bos_default() ? L.tok->bos_id() : -1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\n%lld tokens scored in %.1f s (%.0f tok/s evaluated)\n", static_cast<long long>(r.n_scored), s,
                 r.n_chunks * static_cast<double>(sp.n_ctx) / s);
    std::printf("PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_stderr);
    // A non-finite perplexity means broken numerics (NaN logits, a model that does not load
    // right): an error, never a result.
    if (!std::isfinite(r.ppl))
      throw std::runtime_error(fmt::format("perplexity is {} (non-finite logits or log-likelihoods)", r.ppl));
    return 0;
  });
}
