// minfer-chat: interactive multi-turn chat, each turn rendered with the model's chat template
// (--chat-template chatml|FILE overrides it). The KV cache is kept across turns: each turn
// evaluates only the tokens that follow what the cache already holds.
//
// Like llama.cpp's interactive mode: Ctrl-C stops the reply and returns to the prompt (a second
// Ctrl-C at the prompt exits); /exit or /quit (or end of input) leaves; /reset clears the
// conversation; when the conversation no longer fits the context, the oldest turns after the
// system message are dropped (context shift) with a one-line notice.
#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "chat/tokenize_chat.h"
#include "common/common.h"
#include "common/prompt.h"
#include "runtime/generate.h"
#include "tokenizer/unicode.h"

using namespace minfer;

namespace {

std::atomic<bool> g_generating{false};
std::atomic<bool> g_cancel{false};
std::atomic<bool> g_quit{false};

void on_sigint(int) {
  if (g_generating.load()) g_cancel = true;  // stop the reply, back to the prompt
  else g_quit = true;                         // at the prompt: leave
}

void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: Ctrl-C at the prompt interrupts the read
  sigaction(SIGINT, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-chat: interactive chat with a GGUF model"};
    examples::ModelArgs margs;
    SamplerParams sp;
    std::string system, chat_template;
    int n_predict = 512;
    bool no_think = false, escape = true, no_escape = false;
    examples::add_model_flags(app, margs);
    examples::add_sampling_flags(app, sp);
    examples::add_chat_template_flag(app, chat_template);
    app.add_option("--system", system, "system message");
    app.add_option("-n,--n-predict", n_predict, "max tokens per reply (-1: until the context ends, as llama-cli)")
        ->check(examples::at_least(1, -1, "until the context ends"));
    app.add_flag("--no-think", no_think, "enable_thinking = false (Qwen3: an empty think block)");
    app.add_flag("-e,--escape", escape, "process \\n \\t \\\\ \\\" \\' \\xNN in --system (default on)");
    app.add_flag("--no-escape", no_escape, "take --system as typed");
    examples::LlamaArgs av(argc, argv);
    MINFER_PARSE(app, av.argc(), av.argv());
    if (escape && !no_escape) system = examples::process_escapes(system);
    if (const size_t bad = tokenizer::utf8_first_invalid(system); bad != std::string::npos)
      throw std::invalid_argument(fmt::format("--system is not valid UTF-8{} (byte offset {})",
                                              escape && !no_escape ? " after its escapes" : "", bad));

    auto L = examples::load_model(margs);
    const auto& tok = *L.tok;
    const chat::ChatTemplate tpl = chat::select_chat_template(tok, chat_template);
    const auto runner = L.runner(examples::session_params(margs));
    Session session(*runner);
    Sampler sampler(sp);
    std::vector<chat::Message> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    const size_t keep = msgs.size();  // messages the context shift never drops
    std::vector<int32_t> cached;      // the tokens the KV cache holds
    install_sigint();
    std::fprintf(stderr, "minfer-chat: %s on %s, n_ctx %d, template: %s. /reset, /exit; Ctrl-C stops a reply.\n",
                 L.file->name().c_str(), L.device_names().c_str(), session.n_ctx(), tpl.origin().c_str());
    auto prompt_ids = [&] {
      chat::ChatInputs in;
      in.messages = chat::messages_value(msgs);
      if (no_think) in.enable_thinking = false;
      return examples::chat_prompt_ids(tpl, tok, in);
    };
    // A system message that leaves no room for a one-word question is refused now, not blamed on
    // the user's first message.
    if (keep > 0) {
      msgs.push_back({"user", "hi"});
      const size_t need = prompt_ids().size();
      msgs.pop_back();
      if (need >= static_cast<size_t>(session.n_ctx()))
        throw std::invalid_argument(fmt::format("the system message makes a prompt of {} tokens with a one-word question; "
                                                "the context holds {} (-c): shorten --system or raise -c",
                                                need, session.n_ctx()));
    }
    std::string line;
    while (!g_quit) {
      std::fprintf(stderr, "\n> ");
      if (!std::getline(std::cin, line)) break;  // end of input, or Ctrl-C at the prompt
      if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF input (a Windows file, a pipe from one)
      if (line == "/quit" || line == "/exit") break;
      if (line == "/reset") {
        msgs.resize(keep);
        cached.clear();
        session.reset();
        std::fprintf(stderr, "[conversation cleared]\n");
        continue;
      }
      if (line == "/help") {
        std::fprintf(stderr, "/reset clears the conversation, /exit or /quit leaves, Ctrl-C stops a reply; anything else is your message\n");
        continue;
      }
      if (line.empty()) continue;
      if (const size_t bad = tokenizer::utf8_first_invalid(line); bad != std::string::npos) {
        std::fprintf(stderr, "[your message is not valid UTF-8 (byte offset %zu)]\n", bad);
        continue;
      }
      msgs.push_back({"user", line});
      std::vector<int32_t> ids;
      try {
        ids = prompt_ids();
      } catch (const std::exception& e) {  // the template refused the conversation
        std::fprintf(stderr, "[%s]\n", e.what());
        msgs.pop_back();
        continue;
      }
      if (ids.empty()) {  // nothing to evaluate: there would be no logits to sample from
        std::fprintf(stderr, "[the chat template rendered an empty prompt for this conversation]\n");
        msgs.pop_back();
        continue;
      }
      // Context shift: drop the oldest turns after the system message until the conversation and
      // room for a reply fit (-n -1, a reply until the context ends: half of it).
      const auto n_ctx = static_cast<size_t>(session.n_ctx());
      const size_t reserve = n_predict < 0 ? n_ctx / 2 : std::min<size_t>(static_cast<size_t>(n_predict), n_ctx / 2);
      size_t dropped = 0;
      while (ids.size() + reserve > n_ctx && msgs.size() > keep + 1) {
        // One exchange at a time: the oldest message and the replies that follow it.
        size_t n = 1;
        while (keep + n < msgs.size() - 1 && msgs[keep + n].role != "user") ++n;
        msgs.erase(msgs.begin() + static_cast<std::ptrdiff_t>(keep), msgs.begin() + static_cast<std::ptrdiff_t>(keep + n));
        dropped += n;
        ids = prompt_ids();
      }
      if (dropped > 0)
        std::fprintf(stderr, "[context full: dropped the %zu oldest message%s]\n", dropped, dropped == 1 ? "" : "s");
      if (ids.size() >= n_ctx) {
        std::fprintf(stderr, "[%s is %zu tokens; the context holds %zu (-c)]\n",
                     keep > 0 ? "the system message with this message" : "this message alone", ids.size(), n_ctx);
        msgs.pop_back();
        continue;
      }
      // Reuse the longest cached prefix; evaluate only the rest.
      size_t p = 0;
      while (p < cached.size() && p < ids.size() && cached[p] == ids[p]) ++p;
      if (p == ids.size()) --p;  // at least one token must be evaluated to get logits
      session.rollback(static_cast<int32_t>(p));
      cached.resize(p);
      std::vector<int32_t> fresh(ids.begin() + static_cast<std::ptrdiff_t>(p), ids.end());
      GenerateParams gp;
      gp.n_predict = n_predict;  // -1: until end of generation or the context is full
      gp.cancel = &g_cancel;
      g_cancel = false;
      g_generating = true;
      GenerateResult r;
      try {
        r = generate(session, tok, sampler, fresh, gp, [](std::string_view s) {
          std::fwrite(s.data(), 1, s.size(), stdout);
          std::fflush(stdout);
        });
      } catch (const std::exception& e) {
        g_generating = false;
        std::fprintf(stderr, "\n[%s — /reset to start over]\n", e.what());
        msgs.pop_back();
        cached.clear();
        session.reset();
        continue;
      }
      g_generating = false;
      cached.insert(cached.end(), fresh.begin(), fresh.end());
      // The cache holds every generated token but the last (it was sampled, never evaluated).
      cached.insert(cached.end(), r.ids.begin(), r.ids.end() - (r.ids.empty() ? 0 : 1));
      msgs.push_back({"assistant", r.text});
      std::printf("\n");
      std::fflush(stdout);
      const char* why = r.stop_reason == "cancelled" ? ", interrupted" : r.stop_reason == "context" ? ", context full" : "";
      std::fprintf(stderr, "\n[%zu tokens, %.1f tok/s%s]\n", r.ids.size(), r.decode_tok_s(), why);
    }
    std::fprintf(stderr, "\n");
    return 0;
  });
}
