// minfer-server-load: a bounded load test against a running server (load.h). Exit 0 when every
// request got what it should (no 5xx but the documented 503, malformed ones 400), every KV block
// is free afterwards and the server's RSS stayed within the slack between rounds; 1 otherwise.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/flag_checks.h"
#include "load.h"

int main(int argc, char** argv) {
  minfer::server::LoadParams p;
  CLI::App app{"minfer-server-load: a bounded load test for minfer-server"};
  app.option_defaults()->always_capture_default();
  app.add_option("--host", p.host, "server address");
  app.add_option("--port", p.port, "server port")->check(CLI::Range(1, 65535));
  app.add_option("--api-key", p.api_key, "sent as Authorization: Bearer KEY");
  app.add_option("-C,--clients", p.clients, "concurrent clients")->check(CLI::Range(1, 4096));
  app.add_option("-R,--requests", p.requests, "requests per client and round")->check(CLI::Range(1, 1 << 20));
  app.add_option("--rounds", p.rounds, "rounds (RSS is compared between the first and the last)")->check(CLI::Range(1, 1000));
  int prompt_tokens = 0, max_tokens = 0;
  app.add_option("--prompt-tokens", prompt_tokens, "every prompt exactly N tokens (sets --prompt-min/--prompt-max)");
  app.add_option("--prompt-min", p.prompt_min, "shortest prompt in tokens")->check(CLI::Range(1, 1 << 24));
  app.add_option("--prompt-max", p.prompt_max, "longest prompt in tokens")->check(CLI::Range(1, 1 << 24));
  app.add_option("--max-tokens", max_tokens, "every request exactly N tokens out (sets --out-min/--out-max)");
  app.add_option("--out-min", p.out_min, "smallest max_tokens")->check(CLI::Range(1, 1 << 24));
  app.add_option("--out-max", p.out_max, "largest max_tokens")->check(CLI::Range(1, 1 << 24));
  app.add_option("--shared-prefix", p.shared_prefix, "tokens every prompt starts with (prefix cache)")->check(CLI::Range(0, 1 << 24));
  app.add_option("--stream", p.stream, "share of requests streamed (0..1)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--disconnect", p.disconnect, "share of requests the client cuts off (0..1)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--malformed", p.malformed, "share of malformed requests (0..1)")->check(CLI::Range(0.0, 1.0));
  bool eos = false;
  app.add_flag("--stop-at-eos", eos, "let requests stop at end-of-generation tokens (default: ignore_eos)");
  app.add_flag("--chat", p.chat, "chat completions with text prompts (lengths approximate)");
  app.add_option("--seed", p.seed, "random seed (0: random)");
  app.add_option("--timeout", p.timeout_s, "client read timeout in seconds")->check(minfer::examples::above(0));
  app.add_option("--rss-slack-mb", p.rss_slack_mb, "allowed RSS growth between the first and the last round");
  CLI11_PARSE(app, argc, argv);
  if (prompt_tokens > 0) p.prompt_min = p.prompt_max = prompt_tokens;
  if (max_tokens > 0) p.out_min = p.out_max = max_tokens;
  p.ignore_eos = !eos;
  if (p.prompt_min > p.prompt_max || p.out_min > p.out_max || p.malformed + p.disconnect > 1) {
    std::fprintf(stderr, "error: min above max, or --malformed + --disconnect above 1\n");
    return 1;
  }
  try {
    const auto rep = minfer::server::run_load(p);
    std::fputs(minfer::server::format_report(p, rep).c_str(), stdout);
    return rep.pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
