// minfer-generate: text completion, the main job. With no arguments it runs the small model
// shipped in the repo on a default prompt, streams the text and prints prefill/decode speed.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/common.h"
#include "runtime/generate.h"
#include "tokenizer/chat.h"
#include "runtime/backends.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-generate: complete a prompt with a GGUF model"};
    examples::ModelArgs margs;
    SamplerParams sp;
    std::string prompt = "def fibonacci(n):\n    ", prompt_file, system;
    int n_predict = 128;
    bool chat = false, no_think = false, json = false, no_show_prompt = false;
    std::vector<std::string> stop;
    examples::add_model_flags(app, margs);
    examples::add_sampling_flags(app, sp);
    app.add_option("-p,--prompt", prompt, "prompt text");
    app.add_option("-f,--file", prompt_file, "read the prompt from a file (instead of -p)");
    app.add_option("-n,--n-predict", n_predict, "tokens to generate (-1: until end of text or context)")
        ->check(CLI::Range(-1, 1 << 30));
    app.add_flag("--chat", chat, "wrap the prompt as a ChatML user turn (the model's chat format)");
    app.add_option("--system", system, "system message for --chat");
    app.add_flag("--no-think", no_think, "Qwen3 chat: disable thinking (empty think block)");
    app.add_option("--stop", stop, "stop string (repeatable)");
    app.add_flag("--json", json, "print one JSON object (prompt_ids, ids, text, timings) instead of streaming");
    app.add_flag("--no-show-prompt", no_show_prompt, "do not echo the prompt before the completion");
    CLI11_PARSE(app, argc, argv);

    if (!prompt_file.empty()) {
      std::ifstream in(prompt_file);
      if (!in) throw std::runtime_error(fmt::format("cannot read prompt file '{}'", prompt_file));
      std::stringstream ss;
      ss << in.rdbuf();
      prompt = ss.str();
    }
    auto L = examples::load_model(margs);
    const auto& tok = *L.tok;
    std::string text = prompt;
    if (chat) {
      std::vector<tokenizer::ChatMessage> msgs;
      if (!system.empty()) msgs.push_back({"system", system});
      msgs.push_back({"user", prompt});
      auto opts = tokenizer::chat_options_for(L.model->hparams().arch, L.file->get_string_or("tokenizer.chat_template", ""));
      opts.enable_thinking = !no_think;
      text = tokenizer::format_chatml(msgs, true, opts);
    }
    auto ids = tok.encode(text, /*parse_special=*/chat, tok.add_bos_default());
    Session session(*L.model, *L.backend, examples::session_params(margs));
    if (static_cast<int64_t>(ids.size()) > session.n_ctx())
      throw ContextFullError(fmt::format("the prompt has {} tokens but the context holds {} (n_ctx); use -c to raise it",
                                         ids.size(), session.n_ctx()));
    Sampler sampler(sp);
    GenerateParams gp;
    gp.n_predict = n_predict;
    gp.stop = stop;
    if (!json) {
      std::fprintf(stderr, "model: %s (%s, %d layers, n_embd %d) on %s, n_ctx %d, seed %llu\n",
                   L.file->name().c_str(), L.model->hparams().arch.c_str(), L.model->hparams().n_layer,
                   L.model->hparams().n_embd, std::string(L.backend->name()).c_str(), session.n_ctx(),
                   static_cast<unsigned long long>(sampler.seed()));
      if (!no_show_prompt) std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    }
    auto sink = [&](std::string_view s) {
      if (json) return;
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
    };
    GenerateResult r = generate(session, tok, sampler, ids, gp, sink);
    if (json) {
      nlohmann::json j;
      j["prompt_ids"] = r.prompt_ids;
      j["ids"] = r.ids;
      j["text"] = r.text;
      j["stop_reason"] = r.stop_reason;
      j["device"] = std::string(L.backend->name());
      j["seed"] = sampler.seed();
      j["timings"] = {{"prefill_tokens", r.n_prompt_eval}, {"prefill_ms", r.prefill_ms},
                      {"prefill_tok_s", r.prefill_tok_s()}, {"decode_tokens", r.ids.size() > 0 ? r.ids.size() - 1 : 0},
                      {"decode_ms", r.decode_ms}, {"decode_tok_s", r.decode_tok_s()}};
      std::puts(j.dump().c_str());
    } else {
      std::printf("\n");
      std::fflush(stdout);  // the stats line on stderr must come after the text
      if (r.stop_reason == "context")
        std::fprintf(stderr, "[context full: n_ctx = %d reached after %zu generated tokens; use -c to raise it]\n",
                     session.n_ctx(), r.ids.size());
      std::fprintf(stderr, "prefill: %d tokens in %.1f ms, %.1f tok/s | decode: %zu tokens in %.1f ms, %.1f tok/s | stop: %s\n",
                   r.n_prompt_eval, r.prefill_ms, r.prefill_tok_s(), r.ids.size() > 0 ? r.ids.size() - 1 : 0, r.decode_ms,
                   r.decode_tok_s(), r.stop_reason.c_str());
    }
    return 0;
  });
}
