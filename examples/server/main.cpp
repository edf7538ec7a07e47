// minfer-server: an OpenAI-compatible HTTP server (see server.h for the API).
//   minfer-server -m model.gguf --port 8080
//   curl localhost:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}]}'
#include <fmt/format.h>

#include <cstdio>

#include "common/prompt.h"
#include "server.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-server: OpenAI-compatible HTTP API"};
    examples::ModelArgs margs;
    server::ServerParams sp;
    std::string host = "127.0.0.1";
    int port = 8080;
    examples::add_model_flags(app, margs);
    app.add_option("--host", host, "address to listen on");
    app.add_option("--port", port, "port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
    app.add_option("-n,--n-predict", sp.n_predict_default, "max_tokens when a request gives none");
    app.add_option("--alias", sp.model_name, "model id reported by the API");
    examples::add_chat_template_flag(app, sp.chat_template);
    examples::LlamaArgs av(argc, argv);
    MINFER_PARSE(app, av.argc(), av.argv());
    auto L = examples::load_model(margs);
    server::Server srv(L, examples::session_params(margs), sp);
    httplib::Server http;
    srv.install(http);
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which lets a second server
    // silently share the port instead of failing with "address in use".
    http.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof(yes));
    });
    if (port == 0) port = http.bind_to_any_port(host);
    else if (!http.bind_to_port(host, port)) port = -1;
    if (port <= 0) throw std::runtime_error(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", host, port));
    std::fprintf(stderr, "minfer-server: %s on %s, listening on http://%s:%d\n", L.file->name().c_str(),
                 std::string(L.backend->name()).c_str(), host.c_str(), port);
    http.listen_after_bind();
    return 0;
  });
}
