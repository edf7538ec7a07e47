// A bounded load test for minfer-server (or any OpenAI-compatible server): -C client threads, each
// sending -R requests one after another over its own keep-alive connection (a cut-off request
// opens one of its own) — random prompt and
// output lengths (token-id prompts, so lengths are exact), streamed or not, a share of them cut
// off by the client mid-way (a disconnect), a share malformed (each must get 400). It stops by
// itself and reports latency percentiles, time to first token, aggregate generated tokens/s, and
// what the server's /metrics say afterwards: every KV block free and RSS steady between rounds.
//   minfer-server-load --port 8080 -C 32 -R 25            (defaults: mixed lengths, 10 % cut off)
//   minfer-server-load --port 8080 -C 16 -R 8 --prompt-tokens 512 --max-tokens 128 --stream 1
//       --disconnect 0 --malformed 0 --rounds 1           (the H200 figure, one line)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace minfer::server {

struct LoadParams {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int clients = 32;
  int requests = 25;          ///< per client and round
  int rounds = 2;             ///< RSS is compared between the ends of the rounds
  int prompt_min = 4, prompt_max = 200;  ///< prompt tokens (capped to leave room for the output)
  int out_min = 1, out_max = 64;         ///< max_tokens
  int shared_prefix = 0;      ///< tokens every prompt starts with (exercises the prefix cache)
  double stream = 0.5;        ///< share of requests streamed
  double disconnect = 0.1;    ///< share cut off by the client
  double malformed = 0.05;    ///< share sent malformed (400 expected)
  bool ignore_eos = true;     ///< every request generates exactly max_tokens (unless cut off)
  bool chat = false;          ///< /v1/chat/completions with text instead of token-id prompts
  uint64_t seed = 0;          ///< 0: random
  double timeout_s = 600;     ///< client read timeout
  double rss_slack_mb = 64;   ///< allowed RSS growth from the end of round 1 to the last round
  bool verbose = false;
};

struct LoadRound {
  double wall_s = 0;
  int64_t ok = 0, cut_off = 0, rejected_503 = 0, bad_400 = 0, unexpected = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::vector<double> latency_ms;  ///< completed requests, send to last byte
  std::vector<double> ttft_ms;     ///< completed streamed requests, send to first text
  double rss_mb = 0;               ///< the server's process_resident_memory_bytes after the round
  int64_t kv_blocks_used = -1;     ///< after the round, once the server is idle
  std::vector<std::string> problems;
};

struct LoadReport {
  std::vector<LoadRound> rounds;
  bool pass = false;
  std::vector<std::string> problems;
};

/// Runs the load against a server that is up. Throws std::runtime_error when it cannot reach it.
LoadReport run_load(const LoadParams& p);

/// The report as text: one line per round, then PASS or FAIL with the reasons.
std::string format_report(const LoadParams& p, const LoadReport& r);

/// The q-quantile (0..1) of xs, by the nearest-rank method; 0 for none.
double percentile(std::vector<double> xs, double q);

}  // namespace minfer::server
