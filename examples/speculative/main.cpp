// minfer-speculative: generation with a draft model proposing tokens that the target verifies in
// one batched pass. Prints the text, the acceptance rate and the speed; --compare also runs plain
// decoding with the same settings and reports the speedup (and, greedy, that the text is equal).
#include <fmt/format.h>

#include <cstdio>

#include "common/common.h"
#include "models/registry.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-speculative: speculative decoding with a draft model"};
    examples::ModelArgs margs;
    SamplerParams sp;
    SpeculativeParams spec;
    std::string draft_path, prompt = "def fibonacci(n):\n    ";
    int n_predict = 128;
    bool compare = false;
    examples::add_model_flags(app, margs);
    examples::add_sampling_flags(app, sp);
    app.add_option("--md,--model-draft", draft_path, "draft model GGUF (same vocabulary)")->required();
    app.add_option("-p,--prompt", prompt, "prompt text");
    app.add_option("-n,--n-predict", n_predict, "tokens to generate");
    app.add_option("--draft-max", spec.n_draft, "max tokens drafted per step")->check(CLI::Range(1, 64));
    app.add_option("--draft-min", spec.n_draft_min, "min tokens drafted per step")->check(CLI::Range(1, 64));
    bool fixed = false;
    app.add_flag("--no-adaptive", fixed, "keep the draft depth fixed at --draft-max");
    app.add_flag("--compare", compare, "also run plain decoding and report the speedup");
    CLI11_PARSE(app, argc, argv);
    spec.adaptive = !fixed;
    if (spec.n_draft_min > spec.n_draft) throw std::invalid_argument("--draft-min must not exceed --draft-max");

    auto L = examples::load_model(margs);
    auto draft_file = std::make_shared<const gguf::File>(draft_path);
    auto draft = models::load(draft_file, *L.backend);
    const auto& tok = *L.tok;
    auto ids = tok.encode(prompt, false, tok.add_bos_default());
    auto sparams = examples::session_params(margs);
    Session target_s(*L.model, *L.backend, sparams), draft_s(*draft, *L.backend, sparams);
    SpeculativeDecoder dec(target_s, draft_s, spec);
    Sampler sampler(sp);
    GenerateParams gp;
    gp.n_predict = n_predict;
    std::fputs(prompt.c_str(), stdout);
    auto r = dec.generate(tok, sampler, ids, gp, [](std::string_view s) {
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
    });
    const auto& st = dec.stats();
    std::fprintf(stderr, "\nspeculative: %zu tokens in %.1f ms, %.1f tok/s | %lld target passes, %lld drafted, %lld accepted (%.1f%%)\n",
                 r.ids.size(), r.decode_ms, r.decode_tok_s(), static_cast<long long>(st.n_steps),
                 static_cast<long long>(st.n_drafted), static_cast<long long>(st.n_accepted), 100 * st.acceptance());
    if (compare) {
      Session plain(*L.model, *L.backend, sparams);
      Sampler s2(sp.seed == kSeedRandom ? SamplerParams{sp.temp, sp.top_k, sp.top_p, sp.min_p, sp.repeat_penalty,
                                                        sp.repeat_last_n, sp.presence_penalty, sp.frequency_penalty,
                                                        sampler.seed()}
                                        : sp);
      auto p = generate(plain, tok, s2, ids, gp);
      std::fprintf(stderr, "plain:       %zu tokens in %.1f ms, %.1f tok/s | speedup %.2fx%s\n", p.ids.size(), p.decode_ms,
                   p.decode_tok_s(), p.decode_ms / r.decode_ms * static_cast<double>(r.ids.size()) / static_cast<double>(p.ids.size()),
                   sampler.greedy() ? (p.ids == r.ids ? " | greedy text identical" : " | GREEDY TEXT DIFFERS") : "");
    }
    return 0;
  });
}
