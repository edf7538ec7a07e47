// minfer-chat: interactive multi-turn chat in the model's ChatML format. The KV cache is kept
// across turns: each turn evaluates only the tokens that follow what the cache already holds.
// Commands: /reset clears the conversation, /help lists the commands, /quit (or end of input) leaves.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "common/common.h"
#include "runtime/generate.h"
#include "tokenizer/chat.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-chat: interactive chat with a GGUF model"};
    examples::ModelArgs margs;
    SamplerParams sp;
    std::string system;
    int n_predict = 512;
    bool no_think = false;
    examples::add_model_flags(app, margs);
    examples::add_sampling_flags(app, sp);
    app.add_option("--system", system, "system message");
    app.add_option("-n,--n-predict", n_predict, "max tokens per reply");
    app.add_flag("--no-think", no_think, "Qwen3: disable thinking");
    MINFER_PARSE(app, argc, argv);

    auto L = examples::load_model(margs);
    const auto& tok = *L.tok;
    Session session(*L.model, *L.backend, examples::session_params(margs));
    Sampler sampler(sp);
    auto opts = tokenizer::chat_options_for(L.model->hparams().arch, L.file->get_string_or("tokenizer.chat_template", ""));
    opts.enable_thinking = !no_think;
    std::vector<tokenizer::ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    std::vector<int32_t> cached;  // the tokens the KV cache holds
    std::fprintf(stderr, "minfer-chat: %s on %s, n_ctx %d. /reset, /quit.\n", L.file->name().c_str(),
                 std::string(L.backend->name()).c_str(), session.n_ctx());
    std::string line;
    while (true) {
      std::fprintf(stderr, "\n> ");
      if (!std::getline(std::cin, line) || line == "/quit") break;
      if (line == "/reset") {
        msgs.resize(system.empty() ? 0 : 1);
        cached.clear();
        session.reset();
        std::fprintf(stderr, "[conversation cleared]\n");
        continue;
      }
      if (line == "/help") {
        std::fprintf(stderr, "/reset clears the conversation, /quit leaves; anything else is your message\n");
        continue;
      }
      if (line.empty()) continue;
      msgs.push_back({"user", line});
      auto ids = tok.encode(tokenizer::format_chatml(msgs, true, opts), /*parse_special=*/true);
      // Reuse the longest cached prefix; evaluate only the rest.
      size_t p = 0;
      while (p < cached.size() && p < ids.size() && cached[p] == ids[p]) ++p;
      if (p == ids.size()) --p;  // at least one token must be evaluated to get logits
      session.rollback(static_cast<int32_t>(p));
      cached.resize(p);
      std::vector<int32_t> fresh(ids.begin() + static_cast<std::ptrdiff_t>(p), ids.end());
      GenerateParams gp;
      gp.n_predict = n_predict;
      GenerateResult r;
      try {
        r = generate(session, tok, sampler, fresh, gp, [](std::string_view s) {
          std::fwrite(s.data(), 1, s.size(), stdout);
          std::fflush(stdout);
        });
      } catch (const ContextFullError& e) {
        std::fprintf(stderr, "\n[%s — /reset to start over]\n", e.what());
        msgs.pop_back();
        continue;
      }
      cached.insert(cached.end(), fresh.begin(), fresh.end());
      // The cache holds every generated token but the last (it was sampled, never evaluated).
      cached.insert(cached.end(), r.ids.begin(), r.ids.end() - (r.ids.empty() ? 0 : 1));
      msgs.push_back({"assistant", r.text});
      std::printf("\n");
      std::fflush(stdout);
      std::fprintf(stderr, "\n[%zu tokens, %.1f tok/s%s]\n", r.ids.size(), r.decode_tok_s(),
                   r.stop_reason == "context" ? ", context full: /reset" : "");
    }
    return 0;
  });
}
