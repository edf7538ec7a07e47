// minfer-bench: prefill and decode throughput, in the manner of llama-bench.
//   pp<N>: evaluate N prompt tokens in one pass (ubatch -b) from the given depth;
//   tg<N>: generate N tokens one forward pass at a time from the given depth;
//   vb<N>: a speculative verify batch: N tokens in one pass with logits for every row, then the
//          cache rolled back; 32 passes per repetition, t/s counts N tokens a pass (the pass
//          takes N / (t/s) seconds; compare with tg's 1 / (t/s) for the cost of one token).
// Each test runs once as a warm-up, then -r times; tokens are random ids. Results: mean ±
// standard deviation of tok/s, as a markdown table (default) or JSON (-o json).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/common.h"
#include "quantize/ftype.h"

using namespace minfer;

namespace {

struct Stat {
  double mean = 0, sd = 0;
  std::vector<double> samples;
};

Stat stats(const std::vector<double>& v) {
  Stat s;
  s.samples = v;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-bench: prefill (pp) and decode (tg) throughput"};
    examples::ModelArgs margs;
    std::string p_list = "512", n_list = "128", v_list, d_list = "0", output = "md";
    int reps = 5;
    examples::add_model_flags(app, margs);
    app.add_option("-p,--n-prompt", p_list, "prefill sizes, comma-separated (0: none)");
    app.add_option("-n,--n-gen", n_list, "decode lengths, comma-separated (0: none)");
    app.add_option("-v,--n-verify", v_list, "verify batch sizes, comma-separated (default: none)");
    app.add_option("-d,--n-depth", d_list, "KV depths the tests start from, comma-separated");
    app.add_option("-r,--repetitions", reps, "timed repetitions after one warm-up")->check(examples::at_least(1));
    app.add_option("-o,--output", output, "md or json")->check(CLI::IsMember({"md", "json"}));
    examples::LlamaArgs av(argc, argv);
    MINFER_PARSE(app, av.argc(), av.argv());
    if (reps < 1) throw std::invalid_argument("-r must be at least 1");

    auto L = examples::load_model(margs);
    const HParams& h = L.model->hparams();
    const auto pps = examples::parse_int_list(p_list, "-p"), tgs = examples::parse_int_list(n_list, "-n"),
               vbs = examples::parse_int_list(v_list, "-v"), depths = examples::parse_int_list(d_list, "-d");
    int max_len = 0;
    for (int p : pps) max_len = std::max(max_len, p);
    for (int n : tgs) max_len = std::max(max_len, n);
    for (int n : vbs) max_len = std::max(max_len, n);
    int max_depth = 0;
    for (int d : depths) max_depth = std::max(max_depth, d);
    // The deepest test's positions, checked before they are sized (a sum past 2^31 wrapped).
    constexpr int64_t kMaxPositions = int64_t{1} << 30;
    const int64_t positions = int64_t{max_depth} + max_len;
    if (positions > kMaxPositions)
      throw std::invalid_argument(fmt::format("-d {} with a test of {} tokens needs {} positions, more than minfer-bench takes ({})",
                                              max_depth, max_len, positions, kMaxPositions));
    auto sp = examples::session_params(margs);
    if (sp.n_ctx <= 0) {
      sp.n_ctx = static_cast<int32_t>(positions);
      if (positions > h.n_ctx_train)
        std::fprintf(stderr, "note: the tests reach position %lld, past the model's training context (%d): timing only\n",
                     static_cast<long long>(positions), h.n_ctx_train);
    }
    for (int p : pps) sp.n_batch = std::max(sp.n_batch, p);
    for (int n : vbs) sp.n_batch = std::max(sp.n_batch, n);
    sp.n_out_max = 1;  // prefill and decode read one logit row; verify batches all of theirs
    for (int n : vbs) sp.n_out_max = std::max(sp.n_out_max, n);
    const auto runner = L.runner(sp);
    Session session(*runner);
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> tok(0, h.n_vocab - 1);
    auto random_tokens = [&](int n) {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (auto& t : v) t = tok(rng);
      return v;
    };
    using Clock = std::chrono::steady_clock;
    // Fills the cache up to `depth` (untimed) so a test starts there.
    auto prepare = [&](int depth) {
      session.reset();
      for (int done = 0; done < depth;) {
        const int n = std::min(depth - done, sp.n_batch);
        session.eval(random_tokens(n));
        done += n;
      }
    };
    auto run_pp = [&](int n, int depth) {
      prepare(depth);
      auto toks = random_tokens(n);
      const auto t0 = Clock::now();
      session.eval(toks);
      return n / std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto run_tg = [&](int n, int depth) {
      prepare(depth);
      auto toks = random_tokens(n);
      const auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) session.eval(std::span<const int32_t>(&toks[static_cast<size_t>(i)], 1));
      return n / std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto run_vb = [&](int n, int depth) {
      constexpr int kPasses = 32;
      prepare(depth);
      auto toks = random_tokens(n);
      const auto t0 = Clock::now();
      for (int i = 0; i < kPasses; ++i) {
        session.eval(toks, /*all_logits=*/true);
        session.rollback(depth);
      }
      return n * kPasses / std::chrono::duration<double>(Clock::now() - t0).count();
    };

    // Counts are integers (llama-bench's JSON has "model_size" and "model_n_params" as integers).
    uint64_t n_params = 0, n_bytes = 0;
    for (const auto& t : L.file->tensors()) {
      n_params += static_cast<uint64_t>(t.nelements());
      n_bytes += static_cast<uint64_t>(t.nbytes);
    }
    const auto params = static_cast<double>(n_params), bytes = static_cast<double>(n_bytes);
    // The file type as llama-bench shows it: general.file_type's name ("Q4_K_M"), else the dtype
    // holding most of the matrix bytes.
    const std::string ftype = [&] {
      if (auto ft = L.file->get_optional<uint32_t>("general.file_type"))
        for (auto t : quantize::all_file_types())
          if (static_cast<uint32_t>(t) == *ft) return std::string(quantize::file_type_name(t));
      std::map<std::string, double> by;
      for (const auto& t : L.file->tensors())
        if (t.ne[1] > 1) by[std::string(dtype_name(t.type))] += static_cast<double>(t.nbytes);
      std::string best;
      double bb = -1;
      for (auto& [k, v] : by)
        if (v > bb) bb = v, best = k;
      return best;
    }();
    struct Row {
      std::string test;
      int n, depth;
      Stat st;
    };
    std::vector<Row> rows;
    for (int depth : depths) {
      for (int p : pps) {
        if (p <= 0) continue;
        run_pp(p, depth);  // warm-up
        std::vector<double> v;
        for (int r = 0; r < reps; ++r) v.push_back(run_pp(p, depth));
        rows.push_back({fmt::format("pp{}", p), p, depth, stats(v)});
      }
      for (int n : tgs) {
        if (n <= 0) continue;
        run_tg(n, depth);
        std::vector<double> v;
        for (int r = 0; r < reps; ++r) v.push_back(run_tg(n, depth));
        rows.push_back({fmt::format("tg{}", n), n, depth, stats(v)});
      }
      for (int n : vbs) {
        if (n <= 0) continue;
        run_vb(n, depth);
        std::vector<double> v;
        for (int r = 0; r < reps; ++r) v.push_back(run_vb(n, depth));
        rows.push_back({fmt::format("vb{}", n), n, depth, stats(v)});
      }
    }
    const std::string model_desc = fmt::format("{} {} {}", h.arch, h.name.empty() ? "" : h.name, ftype);
    if (output == "json") {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : rows)
        j.push_back({{"model", L.file->name()}, {"arch", h.arch}, {"type", ftype}, {"size_bytes", n_bytes},
                     {"params", n_params}, {"backend", L.device_names()}, {"test", r.test},
                     {"n", r.n}, {"depth", r.depth}, {"avg_ts", r.st.mean}, {"stddev_ts", r.st.sd},
                     {"samples_ts", r.st.samples}});
      std::puts(j.dump(2).c_str());
    } else {
      std::printf("| model | size | params | backend | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: |\n");
      for (const auto& r : rows)
        std::printf("| %s | %s | %s | %s | %s%s | %.2f ± %.2f |\n", model_desc.c_str(),
                    (bytes >= (1 << 30) ? fmt::format("{:.2f} GiB", bytes / (1 << 30)) : fmt::format("{:.2f} MiB", bytes / (1 << 20))).c_str(),
                    (params >= 1e9 ? fmt::format("{:.2f} B", params / 1e9) : fmt::format("{:.2f} M", params / 1e6)).c_str(), L.device_names().c_str(), r.test.c_str(),
                    r.depth ? fmt::format(" @ d{}", r.depth).c_str() : "", r.st.mean, r.st.sd);
    }
    return 0;
  });
}
