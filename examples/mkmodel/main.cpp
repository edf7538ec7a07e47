// minfer-mkmodel: writes a random-weight Qwen2/Qwen3/Qwen3-MoE/Llama GGUF of a real model's shape, quantized with
// a llama.cpp mix, for load, speed and memory tests without downloads.
//   minfer-mkmodel --shape qwen2.5-7b -o q7b.gguf                       # Q4_K_M, synthetic vocab
//   minfer-mkmodel --shape qwen3-8b -o q8b.gguf --type Q8_0 --vocab qwen-vocab.gguf
//   minfer-mkmodel --shape llama3.1-8b -o l8b.gguf --vocab llama3-vocab.gguf   # rope_freqs too
//   minfer-mkmodel --arch qwen3 --n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 --head-dim 64
//       --n-ff 512 --n-vocab 1024 --tied -o tiny.gguf
//   minfer-mkmodel --shape qwen2.5-7b --n-layer 2 -o q7b-2layers.gguf   # a shape with overrides
//   minfer-mkmodel --shape qwen3-30b-a3b -o a3b.gguf                    # MoE: 128 experts, 8 per token
// Errors print "error: ..." and exit with 1.
#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "common/common.h"
#include "quantize/mkmodel.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-mkmodel: random-weight Qwen2/Qwen3/Qwen3-MoE/Llama GGUF models of real shapes"};
    std::string shape_name, out, type = "Q4_K_M", vocab, arch;
    uint64_t seed = 0;
    int threads = 0;
    bool list = false, quiet = false;
    std::optional<int32_t> n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx, n_expert, n_expert_used,
        n_ff_exp;
    std::optional<float> rope_base, rms_eps;
    bool tied = false, untied = false;
    float stddev = 0.02f;
    std::string shape_help = "named shape:";
    for (const auto& s : quantize::named_shapes()) shape_help += " " + s.name;
    app.add_option("--shape", shape_name, shape_help);
    app.add_option("-o,--output", out, "output GGUF file");
    app.add_option("--type", type, quantize::target_help() + " (default Q4_K_M)");
    app.add_option("--vocab", vocab, "copy the tokenizer of this GGUF (padded to n_vocab); default: synthetic byte-level BPE");
    app.add_option("--seed", seed, "RNG seed (default 0)");
    app.add_option("-t,--threads", threads, "threads (0: all)")->check(examples::thread_count());
    app.add_option("--arch", arch, "custom shape: qwen2, qwen3, qwen3moe or llama (or override the shape's)");
    app.add_option("--n-embd", n_embd, "hidden size");
    app.add_option("--n-layer", n_layer, "blocks");
    app.add_option("--n-head", n_head, "attention heads");
    app.add_option("--n-head-kv", n_head_kv, "key/value heads (default: --n-head, no GQA)");
    app.add_option("--head-dim", head_dim, "head dimension (default n_embd / n_head)");
    app.add_option("--n-ff", n_ff, "feed-forward size");
    app.add_option("--n-vocab", n_vocab, "vocabulary size (rows of token_embd)");
    app.add_option("--n-expert", n_expert, "qwen3moe: experts per layer");
    app.add_option("--n-expert-used", n_expert_used, "qwen3moe: experts per token (top-k)");
    app.add_option("--n-ff-exp", n_ff_exp, "qwen3moe: feed-forward size of one expert");
    app.add_option("--n-ctx", n_ctx, "context_length (default 32768 for custom shapes)");
    app.add_option("--rope-base", rope_base, "rope.freq_base (default 1e6)");
    app.add_option("--rms-eps", rms_eps, "RMSNorm epsilon (default 1e-6)");
    app.add_flag("--tied", tied, "tie the output projection to token_embd (no output.weight)");
    app.add_flag("--untied", untied, "separate output.weight");
    app.add_option("--stddev", stddev, "weight standard deviation (default 0.02)");
    app.add_flag("--list-shapes", list, "print the named shapes and exit");
    app.add_flag("-q,--quiet", quiet, "no per-tensor progress");
    MINFER_PARSE(app, argc, argv);

    if (list) {
      for (const auto& s : quantize::named_shapes())
        std::printf("%-13s %s n_embd %d, %d layers, heads %d/%d, head_dim %d, n_ff %d, n_vocab %d, ctx %d, %s, %s params\n",
                    s.name.c_str(), s.arch.c_str(), s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.head_dim_or_default(),
                    s.n_ff, s.n_vocab, s.n_ctx_train, s.tied ? "tied" : "untied", quantize::size_label(s.n_params()).c_str());
      return 0;
    }
    if (out.empty()) throw std::invalid_argument("-o OUT.gguf is required");
    quantize::MakeModelParams p;
    if (!shape_name.empty()) p.shape = quantize::find_shape(shape_name);
    else if (arch.empty()) throw std::invalid_argument("give --shape NAME or --arch qwen2|qwen3|qwen3moe|llama with custom dimensions");
    if (!arch.empty()) p.shape.arch = arch;
    auto set = [](auto& dst, const auto& v) { if (v) dst = *v; };
    set(p.shape.n_embd, n_embd);
    set(p.shape.n_layer, n_layer);
    set(p.shape.n_head, n_head);
    set(p.shape.n_head_kv, n_head_kv);
    if (!n_head_kv && p.shape.n_head_kv == 0) p.shape.n_head_kv = p.shape.n_head;  // no GQA unless asked
    set(p.shape.head_dim, head_dim);
    set(p.shape.n_ff, n_ff);
    set(p.shape.n_vocab, n_vocab);
    set(p.shape.n_expert, n_expert);
    set(p.shape.n_expert_used, n_expert_used);
    set(p.shape.n_ff_exp, n_ff_exp);
    set(p.shape.n_ctx_train, n_ctx);
    set(p.shape.rope_freq_base, rope_base);
    set(p.shape.rms_eps, rms_eps);
    if (tied && untied) throw std::invalid_argument("--tied and --untied contradict each other");
    if (tied) p.shape.tied = true;
    if (untied) p.shape.tied = false;
    if (shape_name.empty()) p.shape.display_name = fmt::format("custom {}", p.shape.arch);
    p.target = quantize::parse_target(type);
    p.vocab = vocab;
    p.seed = seed;
    p.n_threads = threads;
    p.stddev = stddev;
    p.shape.validate(quantize::row_block_for(p.target));

    std::fprintf(stderr, "minfer-mkmodel: %s (%s, %s params) as %s -> %s\n", p.shape.name.c_str(), p.shape.arch.c_str(),
                 quantize::size_label(p.shape.n_params()).c_str(), p.target.name.c_str(), out.c_str());
    const auto sum = quantize::make_model(p, out, [&](const quantize::TensorReport& r) {
      if (!quiet) std::fprintf(stderr, "%s\n", quantize::format_tensor_line(r).c_str());
    });
    std::fputs(quantize::format_summary(sum, "f32 size ", "file size").c_str(), stdout);
    std::printf("speed: %.1f M params/s, %.1f MiB/s written\n", static_cast<double>(sum.n_elements) * 1e-6 / sum.seconds,
                static_cast<double>(sum.bytes_out) / (1024.0 * 1024.0) / sum.seconds);
    return 0;
  });
}
