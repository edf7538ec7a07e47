// minfer-server: an OpenAI-compatible HTTP server (see server.h and docs/server.md).
//   minfer-server -m model.gguf -np 8 -c 16384 --port 8080
//   curl localhost:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}]}'
#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "common/prompt.h"
#include "conn.h"
#include "server.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-server: OpenAI-compatible HTTP API with continuous batching"};
    examples::ModelArgs margs;
    server::ServerParams sp;
    sp.engine.timeout_s = 600;  // llama-server's --timeout default
    std::string host = "127.0.0.1";
    int port = 8080;
    examples::add_model_flags(app, margs);
    app.add_option("--host", host, "address to listen on (0.0.0.0: every interface)");
    app.add_option("--port", port, "port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
    app.add_option("--parallel", sp.engine.n_parallel, "-np N: sequences decoded together (slots)")->check(CLI::Range(1, 1024));
    app.add_option("--queue", sp.engine.queue, "sequences that may wait beyond the slots; more get 503")
        ->check(CLI::Range(0, 1 << 20));
    app.add_option("--timeout", sp.engine.timeout_s,
                   "seconds a request may take from its arrival (its generation ends there, finish_reason \"length\") and the "
                   "HTTP read/write timeout, as llama-server's; 0: none")
        ->check(examples::at_least(0));
    bool no_cache = false;
    app.add_flag("--no-cache-prompt", no_cache, "turn the prefix cache off (on by default, as llama-server's cache_prompt)");
    app.add_option("--api-key", sp.api_key, "require 'Authorization: Bearer KEY' on every endpoint but /health");
    app.add_option("--max-body", sp.max_body, "largest request body in bytes (larger: 413, unread)")->check(examples::at_least(1));
    app.add_option("--threads-http", sp.threads_http, "HTTP threads (0: parallel + queue + 8)")->check(examples::at_least(0));
    bool no_prefill = false;
    app.add_flag("--no-prefill-assistant", no_prefill,
                 "render a conversation ending with an assistant message as a finished turn (by default its text is the "
                 "start of the reply the model continues, as llama-server's)");
    bool no_warmup = false;
    app.add_flag("--no-warmup", no_warmup, "skip running the step shapes once before serving");
    bool no_log = false;
    app.add_flag("--no-access-log", no_log, "no per-request log line on stderr");
    app.add_option("-n,--n-predict", sp.n_predict, "max_tokens when a request gives none (-1: until the context ends)")
        ->check(CLI::Range(-1, 1 << 30));
    app.add_option("-a,--alias", sp.model_name, "model id reported by the API");
    int no_effect = 0;  // llama-server flags launch scripts pass that change nothing here
    app.add_flag("--jinja,--metrics,--cont-batching,--no-webui", no_effect,
                 "accepted for llama-server's scripts: templates are always Jinja, /metrics is always served, "
                 "batching is always continuous, there is no web UI");
    examples::add_sampling_flags(app, sp.sampling);  // defaults for fields a request leaves out
    examples::add_chat_template_flag(app, sp.chat_template);
    examples::LlamaArgs av(argc, argv);
    MINFER_PARSE(app, av.argc(), av.argv());
    sp.engine.prefix_cache = !no_cache;
    sp.access_log = !no_log;
    sp.engine.warmup = !no_warmup;
    sp.prefill_assistant = !no_prefill;
    if (sp.n_predict == 0) throw std::invalid_argument("-n 0 would generate nothing; use -1 for no limit");

    // SIGINT / SIGTERM end the server cleanly: every thread blocks them and one waits for them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    // -c is the KV pool of all slots together, not one sequence's context: the loader's warning
    // about -c above the trained context does not apply (one sequence holds at most that).
    examples::ModelArgs load_args = margs;
    load_args.n_ctx = 0;
    auto L = examples::load_model(load_args);
    server::Server srv(L, examples::session_params(margs), sp);
    server::HttpServer http;
    srv.install(http);
    const int asked = port;
    port = server::bind_server(http, host, port);
    if (port <= 0)
      throw std::runtime_error(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", host, asked));
    std::atomic<bool> leaving{false};
    std::thread stopper([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      if (leaving.exchange(true)) return;  // main is leaving on its own
      std::fprintf(stderr, "minfer-server: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      srv.stop(http, port);
    });
    const auto& e = srv.engine();
    if (e.n_parallel() < sp.engine.n_parallel)  // every running sequence needs its row of a -b batch
      std::fprintf(stderr, "minfer-server: warning: -np %d is above what the batch holds (-b): %d slots\n",
                   sp.engine.n_parallel, e.n_parallel());
    // An IPv6 literal is bracketed in a URL (RFC 3986): http://[::1]:8080
    const std::string url_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    std::fprintf(stderr,
                 "minfer-server: %s on %s, %d slots, queue %d, KV pool %d tokens (%d per sequence), prefix cache %s; "
                 "listening on http://%s:%d\n",
                 L.file->name().c_str(), L.device_names().c_str(), e.n_parallel(), e.queue(), e.n_ctx_pool(),
                 e.n_ctx_seq(), sp.engine.prefix_cache ? "on" : "off", url_host.c_str(), port);
    http.listen_after_bind();
    if (!leaving.exchange(true)) pthread_kill(stopper.native_handle(), SIGTERM);  // release the waiter
    stopper.join();
    return 0;
  });
}
