#include "common/generate_main.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/common.h"
#include "common/parallel.h"
#include "runtime/generate.h"
#include "chat/tokenize_chat.h"
#include "common/prompt.h"
#include "runtime/speculative.h"

namespace minfer::examples {
namespace {

nlohmann::json timings_json(const GenerateResult& r) {
  return {{"prefill_tokens", r.n_prompt_eval}, {"prefill_ms", r.prefill_ms}, {"prefill_tok_s", r.prefill_tok_s()},
          {"decode_tokens", r.ids.size() > 0 ? r.ids.size() - 1 : 0}, {"decode_ms", r.decode_ms},
          {"decode_tok_s", r.decode_tok_s()}};
}

std::string depth_hist_text(const SpeculativeStats& st) {
  std::string s;
  for (size_t d = 0; d < st.depth_hist.size(); ++d)
    if (st.depth_hist[d] > 0) s += fmt::format("{}{}:{}", s.empty() ? "" : " ", d, st.depth_hist[d]);
  return s;
}

// The first index where a and b differ (the shorter length when one is a prefix of the other).
size_t first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

int generate_main(int argc, char** argv, const GenerateProgram& program) {
  return run_main([&] {
    // CLI11 reads "-md" as "-m d" and refuses "-ngl": llama.cpp's spellings become long options first.
    LlamaArgs av(argc, argv);

    CLI::App app{program.description, program.name};
    ModelArgs margs;
    SamplerParams sp;
    SpeculativeParams spec;
    std::string prompt = "def fibonacci(n):\n    ", prompt_file, system, draft_path, chat_template;
    int n_predict = 128, n_parallel = 0;
    bool chat = false, no_think = false, json = false, no_show_prompt = false, no_adaptive = false, no_baseline = false;
    bool no_parse_special = false, escape = true, no_escape = false, ignore_eos = false;
    std::vector<std::string> stop;
    add_model_flags(app, margs);
    add_sampling_flags(app, sp);
    app.add_option("-p,--prompt", prompt, "prompt text; special tokens in it are parsed (<|im_start|> is one token)");
    app.add_option("-f,--file", prompt_file, "read the prompt from a file (instead of -p; taken as is, no escapes)");
    app.add_option("-n,--n-predict", n_predict, "tokens to generate (-1: until end of text or context)")
        ->check(CLI::Range(-1, 1 << 30));
    app.add_flag("--chat", chat,
                 "the prompt is a user message, rendered with the model's chat template (its text, never "
                 "special tokens)");
    add_chat_template_flag(app, chat_template);
    app.add_option("--system", system, "system message for --chat");
    app.add_flag("--no-think", no_think, "chat: enable_thinking = false (Qwen3: an empty think block)");
    app.add_option("--stop", stop, "stop string (repeatable); not printed");
    app.add_flag("--no-parse-special", no_parse_special, "tokenize special-token text in the prompt as plain text");
    app.add_flag("-e,--escape", escape, "process \\n \\t \\\\ \\\" \\' \\xNN in -p, --stop and --system (default on)");
    app.add_flag("--no-escape", no_escape, "take -p, --stop and --system as typed");
    app.add_flag("--ignore-eos", ignore_eos,
                 "keep generating past end-of-generation tokens (they stay in the ids, as in Hugging Face's "
                 "generate; llama.cpp bans them instead)");
    app.add_flag("--json", json, "print one JSON object (prompt_ids, ids, text, timings) instead of streaming");
    app.add_flag("--no-show-prompt", no_show_prompt, "do not echo the prompt before the completion");
    app.add_option("--np,--parallel", n_parallel,
                   "with -f: every line of the file is a prompt, N of them decoded at once (-np); completions in "
                   "prompt order")
        ->check(CLI::Range(1, 4096));
    auto* draft_opt = app.add_option(program.draft_required ? "--md,--model-draft,--draft" : "--draft,--md,--model-draft",
                                     draft_path,
                                     "draft model GGUF for speculative decoding, same vocabulary as -m; also spelled -md "
                                     "(llama.cpp's --draft N, a token count, is --draft-max here)");
    if (program.draft_required) draft_opt->required();
    const char* with_draft = program.draft_required ? "" : " (with --draft)";
    app.add_option("--draft-max", spec.n_draft,
                   fmt::format("most tokens drafted per round{} (default: the deepest draft the backend verifies "
                               "batch-invariantly, so greedy output equals plain decoding: 7 on CPU and CUDA)", with_draft))
        ->check(CLI::Range(1, 64));
    app.add_option("--draft-min", spec.n_draft_min,
                   fmt::format("fewest tokens drafted per round{}; 0 lets the policy decode plainly when drafting does "
                               "not pay. Both bounds give way near the -n limit and the end of the context",
                               with_draft))
        ->check(CLI::Range(0, 64));
    app.add_flag("--no-adaptive", no_adaptive,
                 fmt::format("always draft --draft-max tokens{} (default: choose each round from the acceptance and "
                             "the measured draft/verify times; a seed reproduces sampled output only with --no-adaptive)",
                             with_draft));
    app.add_flag("--no-baseline", no_baseline,
                 fmt::format("skip the plain-decoding run that measures the speedup{}", with_draft));
    MINFER_PARSE(app, av.argc(), av.argv());
    spec.adaptive = !no_adaptive;
    const bool speculative = !draft_path.empty();
    if (program.draft_required && margs.model.empty())
      throw std::invalid_argument(fmt::format("{} needs the target model: -m TARGET.gguf -md DRAFT.gguf", program.name));
    if (!speculative)
      for (const char* f : {"--draft-max", "--draft-min", "--no-adaptive", "--no-baseline"})
        if (app.count(f) > 0) std::fprintf(stderr, "warning: %s has no effect without --draft\n", f);
    if (spec.n_draft > 0 && spec.n_draft_min > spec.n_draft)
      throw std::invalid_argument(fmt::format("--draft-min ({}) must not exceed --draft-max ({})", spec.n_draft_min, spec.n_draft));

    if (!chat && (!system.empty() || !chat_template.empty() || no_think))
      std::fprintf(stderr, "warning: --system, --chat-template and --no-think apply to --chat only\n");
    if (escape && !no_escape) {  // everything is checked before the model loads and anything prints
      if (prompt_file.empty()) prompt = process_escapes(prompt);
      system = process_escapes(system);
      for (auto& s : stop) s = process_escapes(s);
    }
    if (!prompt_file.empty()) {
      prompt = read_text_file(prompt_file, "-f");
    }
    if (n_parallel > 0) {
      if (prompt_file.empty()) throw std::invalid_argument("--parallel needs -f PROMPTS (one prompt a line)");
      if (speculative || chat) throw std::invalid_argument("--parallel does not combine with --draft or --chat");
    }
    auto L = load_model(margs);
    if (n_parallel > 0) {
      ParallelRun run;
      run.prompts = prompt_lines(prompt);
      if (run.prompts.empty()) throw std::invalid_argument(fmt::format("'{}' holds no prompt", prompt_file));
      for (const auto& p : run.prompts) run.ids.push_back(raw_prompt_ids(*L.tok, p, !no_parse_special));
      run.n_parallel = n_parallel;
      run.sampling = sp;
      run.params.n_predict = n_predict;
      run.params.stop = stop;
      run.params.stop_at_eog = !ignore_eos;
      run.json = json;
      run.show_prompt = !no_show_prompt;
      return run_parallel(L, session_params(margs), run);
    }
    if (spec.n_draft == 0) {
      spec.n_draft = default_draft_max(*L.backend);
      if (spec.n_draft_min > spec.n_draft)
        throw std::invalid_argument(fmt::format("--draft-min ({}) must not exceed --draft-max (default {} on {})",
                                                spec.n_draft_min, spec.n_draft, L.backend->name()));
    } else if (speculative && spec.n_draft + 1 > L.backend->batch_invariant_rows()) {
      std::fprintf(stderr, "warning: --draft-max %d: verify batches of %d rows are not batch-invariant on %s, so greedy "
                   "output may differ from plain decoding at near ties (up to %lld rows are)\n", spec.n_draft, spec.n_draft + 1,
                   L.device_names().c_str(), static_cast<long long>(L.backend->batch_invariant_rows()));
    }
    std::optional<LoadedDraft> D;
    if (speculative) D.emplace(load_draft(draft_path, L));
    const auto& tok = *L.tok;
    std::string text = prompt;
    std::vector<int32_t> ids;
    if (chat) {
      const chat::ChatTemplate tpl = chat::select_chat_template(tok, chat_template);
      std::vector<chat::Message> msgs;
      if (!system.empty()) msgs.push_back({"system", system});
      msgs.push_back({"user", prompt});
      chat::ChatInputs in;
      in.messages = chat::messages_value(msgs);
      if (no_think) in.enable_thinking = false;
      const jinja::Text rendered = tpl.render(in);
      text = rendered.s;
      ids = chat::tokenize_chat(tok, rendered);
    } else {
      ids = raw_prompt_ids(tok, text, !no_parse_special);
    }
    if (ids.empty()) throw std::invalid_argument("the prompt is empty (it encodes to no tokens)");
    const SessionParams sparams = session_params(margs);
    // What the session will hold: -c as given (a warning past the trained context was printed at
    // load), else the model's context within the KV budget.
    const int32_t n_ctx = ModelRunner::resolve_n_ctx(*L.model, sparams);
    if (static_cast<int64_t>(ids.size()) > n_ctx)
      throw ContextFullError(fmt::format("the prompt has {} tokens but the context holds {} (n_ctx); use -c to raise it",
                                         ids.size(), n_ctx));
    // The sessions reserve their memory now, so an impossible -c fails before anything is printed.
    std::unique_ptr<ModelRunner> main_r = L.runner(sparams);  // plain or target: every rank of -sm tensor
    std::optional<Session> plain_s, target_s, draft_s;
    if (!D) {
      plain_s.emplace(*main_r);
    } else {
      target_s.emplace(*main_r);
      SessionParams dsp = sparams;
      dsp.n_ctx = target_s->n_ctx();  // the draft follows the target's sequence
      draft_s.emplace(*D->model, *L.backend, dsp);
    }
    Sampler sampler(sp);
    GenerateParams gp;
    gp.n_predict = n_predict;
    gp.stop = stop;
    gp.stop_at_eog = !ignore_eos;
    if (!json) {
      const auto& h = L.model->hparams();
      std::fprintf(stderr, "model: %s (%s, %d layers, n_embd %d) on %s, n_ctx %d, seed %llu\n", L.file->name().c_str(),
                   h.arch.c_str(), h.n_layer, h.n_embd, L.device_names().c_str(), n_ctx,
                   static_cast<unsigned long long>(sampler.seed()));
      if (D) {
        const auto& dh = D->model->hparams();
        const std::string depth = spec.adaptive ? fmt::format("depth {}..{}, adaptive", spec.n_draft_min, spec.n_draft)
                                                : fmt::format("depth {}, fixed", spec.n_draft);
        std::fprintf(stderr, "draft: %s (%s, %d layers, n_embd %d), %s\n", D->file->name().c_str(), dh.arch.c_str(),
                     dh.n_layer, dh.n_embd, depth.c_str());
      }
      if (!no_show_prompt) std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    }
    auto sink = [&](std::string_view s) {
      if (json) return;
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
    };

    GenerateResult r;
    SpeculativeStats st;
    if (!D) {
      r = generate(*plain_s, tok, sampler, ids, gp, sink);
    } else {
      SpeculativeDecoder dec(*target_s, *draft_s, spec);  // load_draft checked the vocabularies
      r = dec.generate(tok, sampler, ids, gp, sink);
      st = dec.stats();
      target_s.reset();  // the speculative sessions are freed before the baseline's
      draft_s.reset();
      main_r.reset();
    }

    std::optional<GenerateResult> base;
    if (D && !no_baseline) {
      const auto runner = L.runner(sparams);
      Session plain(*runner);
      SamplerParams bsp = sp;
      bsp.seed = sampler.seed();
      Sampler bs(bsp);
      base = generate(plain, tok, bs, ids, gp);
    }
    const bool greedy = sampler.greedy();
    // Ratio of decode speeds; 0 when there is no baseline or no decode step to time.
    const double speedup =
        base && base->decode_tok_s() > 0 && r.decode_tok_s() > 0 ? r.decode_tok_s() / base->decode_tok_s() : 0.0;

    if (json) {
      nlohmann::json j;
      j["prompt_ids"] = r.prompt_ids;
      j["ids"] = r.ids;
      j["text"] = r.text;
      j["stop_reason"] = r.stop_reason;
      j["device"] = L.device_names();
      j["seed"] = sampler.seed();
      j["timings"] = timings_json(r);
      if (D) {
        j["speculative"] = {{"draft", D->file->name()},
                            {"draft_name", D->model->hparams().name},
                            {"draft_min", spec.n_draft_min},
                            {"draft_max", spec.n_draft},
                            {"adaptive", spec.adaptive},
                            {"rounds", st.n_rounds},
                            {"drafted", st.n_drafted},
                            {"accepted", st.n_accepted},
                            {"drafting_rounds", st.drafting_rounds()},
                            {"acceptance_rate", st.n_drafted ? nlohmann::json(st.acceptance_rate()) : nlohmann::json(nullptr)},
                            {"mean_accepted_length",
                             st.drafting_rounds() ? nlohmann::json(st.mean_accepted_length()) : nlohmann::json(nullptr)},
                            {"tokens_per_verify", st.tokens_per_verify()},
                            {"mean_draft_depth", st.mean_draft_depth()},
                            {"depth_hist", st.depth_hist},
                            {"draft_ms", st.draft_ms},
                            {"verify_ms", st.verify_ms}};
        if (base) {
          j["baseline"] = {{"ids", base->ids},
                           {"decode_ms", base->decode_ms},
                           {"decode_tok_s", base->decode_tok_s()},
                           {"ids_identical", greedy ? nlohmann::json(base->ids == r.ids) : nlohmann::json(nullptr)}};
        } else {
          j["baseline"] = nullptr;
        }
        j["speedup"] = speedup > 0 ? nlohmann::json(speedup) : nlohmann::json(nullptr);
      }
      std::puts(j.dump().c_str());
      return 0;
    }
    std::printf("\n");
    std::fflush(stdout);  // the stats lines on stderr must come after the text
    if (r.stop_reason == "context")
      std::fprintf(stderr, "[context full: n_ctx = %d reached after %zu generated tokens; use -c to raise it]\n", n_ctx,
                   r.ids.size());
    std::fprintf(stderr, "prefill: %d tokens in %.1f ms, %.1f tok/s | decode: %zu tokens in %.1f ms, %.1f tok/s | stop: %s\n",
                 r.n_prompt_eval, r.prefill_ms, r.prefill_tok_s(), r.ids.size() > 0 ? r.ids.size() - 1 : 0, r.decode_ms,
                 r.decode_tok_s(), r.stop_reason.c_str());
    if (D) {
      const std::string rate = st.n_drafted ? fmt::format("{:.1f}%", 100 * st.acceptance_rate()) : std::string("n/a");
      const std::string len = st.drafting_rounds() ? fmt::format("{:.2f}", st.mean_accepted_length()) : std::string("n/a");
      std::fprintf(stderr,
                   "speculative: %lld rounds (%lld drafting), %lld drafted, %lld accepted | acceptance rate %s | "
                   "mean accepted length %s | %.2f tokens per verify | mean draft depth %.2f%s\n",
                   static_cast<long long>(st.n_rounds), static_cast<long long>(st.drafting_rounds()),
                   static_cast<long long>(st.n_drafted), static_cast<long long>(st.n_accepted), rate.c_str(), len.c_str(),
                   st.tokens_per_verify(), st.mean_draft_depth(),
                   st.n_rounds ? (" (rounds by depth " + depth_hist_text(st) + ")").c_str() : "");
      if (base) {
        std::string same;
        if (greedy) {
          same = base->ids == r.ids
                     ? " | greedy ids identical"
                     : fmt::format(" | GREEDY IDS DIFFER from token {}", first_difference(base->ids, r.ids));
        }
        const std::string sx = speedup > 0 ? fmt::format("{:.2f}x", speedup) : std::string("n/a");
        std::fprintf(stderr, "plain decoding (same run): %zu tokens in %.1f ms, %.1f tok/s | speedup %s%s\n",
                     base->ids.size() > 0 ? base->ids.size() - 1 : 0, base->decode_ms, base->decode_tok_s(), sx.c_str(),
                     same.c_str());
      }
    }
    return 0;
  });
}

}  // namespace minfer::examples
