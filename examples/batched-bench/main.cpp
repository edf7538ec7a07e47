// minfer-batched-bench: throughput of many sequences decoded together, as llama-batched-bench
// measures it. For each (PP, TG, B): B sequences each evaluate a PP-token prompt (all of them in
// ubatches of -ub tokens: T_PP), then TG steps each decode one token of every sequence in one
// forward pass (T_TG). With -pps the prompt is evaluated once and the other sequences fork it
// (sharing its KV blocks). Tokens are random ids. Columns: PP, TG, B, N_KV (cells the run needs),
// T_PP s, S_PP t/s, T_TG s, S_TG t/s, T s, S t/s (all tokens over the whole time).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/common.h"
#include "runtime/model_runner.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-batched-bench: prompt and decode throughput of B sequences evaluated together"};
    examples::ModelArgs margs;
    margs.n_batch = 2048;
    std::string npp = "128,256,512", ntg = "128,256", npl = "1,2,4,8,16,32", output = "md";
    int n_ubatch = 512;
    bool pps = false;
    examples::add_model_flags(app, margs);
    app.add_option("--ub,--ubatch-size", n_ubatch, "tokens per forward pass (-ub)")->check(examples::at_least(1));
    app.add_option("--npp", npp, "prompt lengths, comma-separated (-npp)");
    app.add_option("--ntg", ntg, "generated tokens per sequence, comma-separated (-ntg)");
    app.add_option("--npl", npl, "parallel sequences B, comma-separated (-npl)");
    app.add_flag("--pps", pps, "the sequences share one prompt, evaluated once and forked (-pps)");
    app.add_option("-o,--output", output, "md or json")->check(CLI::IsMember({"md", "json"}));
    examples::LlamaArgs av(argc, argv);
    MINFER_PARSE(app, av.argc(), av.argv());
    const auto pp_list = examples::parse_int_list(npp, "-npp"), tg_list = examples::parse_int_list(ntg, "-ntg"),
               pl_list = examples::parse_int_list(npl, "-npl");
    if (pp_list.empty() || tg_list.empty() || pl_list.empty())
      throw std::invalid_argument("-npp, -ntg and -npl need at least one value each");
    for (int pp : pp_list)
      if (pp < 1) throw std::invalid_argument("-npp values must be >= 1 (a sequence starts from its prompt)");
    for (int tg : tg_list)
      if (tg < 0) throw std::invalid_argument("-ntg values must be >= 0");
    for (int pl : pl_list)
      if (pl < 1) throw std::invalid_argument("-npl values must be >= 1");

    RunnerParams rp = examples::session_params(margs);
    // N_KV as llama-batched-bench counts it, and the cells the pool must hold: every sequence's
    // tokens in whole blocks (with -pps the prompt's blocks once, then each sequence's copy of
    // the prompt's partial last block and its own generated tokens).
    const int64_t bs = rp.block_size;
    const auto blocks = [bs](int64_t n) { return (n + bs - 1) / bs; };
    const auto n_kv_of = [&](int64_t pp, int64_t tg, int64_t pl) { return pps ? pp + pl * tg : pl * (pp + tg); };
    const auto cells_of = [&](int64_t pp, int64_t tg, int64_t pl) {
      return bs * (pps ? blocks(pp) + pl * blocks(pp % bs + tg) : pl * blocks(pp + tg));
    };
    constexpr int64_t kMaxCells = int64_t{1} << 30;
    int max_pl = 1, max_seq = 1;
    int64_t max_cells = 1;
    for (int pp : pp_list)
      for (int tg : tg_list)
        for (int pl : pl_list) {
          const int64_t cells = cells_of(pp, tg, pl);
          if (cells > kMaxCells || int64_t{pp} + tg > kMaxCells)
            throw std::invalid_argument(fmt::format("PP {} TG {} B {} needs {} KV cells, more than minfer-batched-bench takes ({})",
                                                    pp, tg, pl, cells, kMaxCells));
          max_pl = std::max(max_pl, pl);
          max_cells = std::max(max_cells, cells);
          max_seq = std::max(max_seq, pp + tg);
        }
    auto L = examples::load_model(margs);
    rp.n_ctx = margs.n_ctx > 0 ? margs.n_ctx : static_cast<int32_t>(max_cells);
    rp.n_batch = std::min(n_ubatch, margs.n_batch);
    rp.n_seq_max = max_pl;
    rp.n_out_max = max_pl;  // a step asks for one row per sequence at most
    rp.n_ctx_seq = max_seq;
    const auto runner_ptr = L.runner(rp);
    ModelRunner& runner = *runner_ptr;
    KvCache& kv = runner.kv();
    const int32_t n_vocab = runner.n_vocab();
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> rand_tok(0, n_vocab - 1);
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    std::vector<BatchToken> batch;
    auto flush = [&] {
      if (!batch.empty()) runner.decode(batch);
      batch.clear();
    };
    auto add = [&](int32_t seq, bool logits) {
      batch.push_back({seq, rand_tok(rng), logits});
      if (static_cast<int>(batch.size()) == runner.n_batch()) flush();
    };
    {  // warm-up: one short prompt, within the longest sequence the runs ask for (npp + ntg may be < 16)
      const int32_t s = kv.seq_new();
      const int n_warm = std::min(16, max_seq);
      for (int i = 0; i < n_warm; ++i) add(s, i == n_warm - 1);
      flush();
      kv.seq_free(s);
    }
    if (output == "md") {
      std::fprintf(stderr, "model: %s on %s, pool %d cells (blocks of %d), ubatch %d, kv %s, shared prompt %d\n",
                   L.file->name().c_str(), L.device_names().c_str(), kv.n_ctx(), kv.block_size(),
                   runner.n_batch(), dtype_name(kv.type()).data(), pps ? 1 : 0);
      std::printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s",
                  "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
      std::printf("|%6s-|-%6s-|-%4s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|\n", "------", "------", "----", "------",
                  "--------", "--------", "--------", "--------", "--------", "--------");
    }
    nlohmann::json rows = nlohmann::json::array();
    for (int pp : pp_list)
      for (int tg : tg_list)
        for (int pl : pl_list) {
          const auto n_kv = static_cast<int>(n_kv_of(pp, tg, pl));
          const int64_t cells = cells_of(pp, tg, pl);
          if (cells > kv.n_ctx()) {
            std::fprintf(stderr, "skipping PP %d TG %d B %d: needs %lld cells (whole blocks of %lld), the pool has %d (-c)\n",
                         pp, tg, pl, static_cast<long long>(cells), static_cast<long long>(bs), kv.n_ctx());
            continue;
          }
          std::vector<int32_t> seqs;
          for (int j = 0; j < pl; ++j) seqs.push_back(kv.seq_new());
          auto t0 = Clock::now();
          for (int j = 0; j < (pps ? 1 : pl); ++j)
            for (int i = 0; i < pp; ++i) add(seqs[static_cast<size_t>(j)], i == pp - 1);
          flush();
          if (pps)
            for (int j = 1; j < pl; ++j) {
              kv.seq_free(seqs[static_cast<size_t>(j)]);
              seqs[static_cast<size_t>(j)] = kv.seq_fork(seqs[0]);
            }
          L.backend->synchronize();
          const double t_pp = seconds(t0);
          t0 = Clock::now();
          for (int i = 0; i < tg; ++i) {
            for (int32_t s : seqs) add(s, true);
            flush();
          }
          L.backend->synchronize();
          const double t_tg = seconds(t0);
          for (int32_t s : seqs) kv.seq_free(s);
          const double pp_tokens = pps ? pp : static_cast<double>(pl) * pp, tg_tokens = static_cast<double>(pl) * tg;
          const double t = t_pp + t_tg;
          const double s_pp = t_pp > 0 ? pp_tokens / t_pp : 0, s_tg = t_tg > 0 ? tg_tokens / t_tg : 0;
          const double s_all = (pp_tokens + tg_tokens) / t;
          if (output == "md") {
            std::printf("|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", pp, tg, pl, n_kv,
                        t_pp, s_pp, t_tg, s_tg, t, s_all);
            std::fflush(stdout);
          }
          rows.push_back({{"n_kv_max", kv.n_ctx()}, {"n_batch", margs.n_batch}, {"n_ubatch", runner.n_batch()},
                          {"is_pp_shared", pps ? 1 : 0}, {"block_size", kv.block_size()}, {"pp", pp}, {"tg", tg},
                          {"pl", pl}, {"n_kv", n_kv}, {"t_pp", t_pp}, {"speed_pp", s_pp}, {"t_tg", t_tg},
                          {"speed_tg", s_tg}, {"t", t}, {"speed", s_all}});
        }
    if (output == "json") std::puts(rows.dump(2).c_str());
    return 0;
  });
}
