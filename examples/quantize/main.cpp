// minfer-quantize: requantizes a GGUF model with one of llama.cpp's mixes or a plain dtype.
//   minfer-quantize model-f16.gguf model-Q4_K_M.gguf Q4_K_M [NTHREADS]   # as llama-quantize
//   minfer-quantize model-f16.gguf model-Q4_K_M.gguf --type Q4_K_M
//   minfer-quantize model-f16.gguf model-q8.gguf --type q8_0 -t 8
//   minfer-quantize model-Q8_0.gguf model-Q4_K_M.gguf --type Q4_K_M --allow-requantize
// Progress (one line per tensor) goes to stderr, the size summary to stdout. Errors (missing
// input, unknown type, unwritable output, ...) print "error: ..." and exit with 1.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "common/common.h"
#include "quantize/quantize_file.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-quantize: quantize a GGUF model with a llama.cpp mix (Q4_K_M, Q8_0, ...) or a plain dtype"};
    std::string in, out, type, type_pos;
    int threads = 0, threads_pos = -1;
    bool allow_requantize = false, pure = false, quiet = false;
    app.add_option("input", in, "input GGUF file")->required();
    app.add_option("output", out, "output GGUF file")->required();
    app.add_option("type", type_pos, "target type, as llama-quantize takes it (or --type)");
    app.add_option("nthreads", threads_pos, "threads, as llama-quantize takes them (or -t)")->check(examples::thread_count());
    app.add_option("--type", type, quantize::target_help());
    app.add_option("-t,--threads", threads, "threads (0: all)")->check(examples::thread_count());
    app.add_flag("--allow-requantize", allow_requantize, "allow inputs that are already quantized (loses quality)");
    app.add_flag("--pure", pure, "no mix: every quantizable tensor gets the type's default dtype");
    app.add_flag("-q,--quiet", quiet, "no per-tensor progress");
    MINFER_PARSE(app, argc, argv);
    if (!type_pos.empty() && !type.empty() && type_pos != type)
      throw std::invalid_argument(fmt::format("two target types: '{}' and --type {}", type_pos, type));
    if (type.empty()) type = type_pos;
    if (type.empty()) throw std::invalid_argument("give the target type: minfer-quantize IN OUT TYPE [NTHREADS] (or --type TYPE)");
    if (threads_pos >= 0) threads = threads_pos;

    quantize::QuantizeParams p;
    p.target = quantize::parse_target(type);
    p.target.pure = p.target.pure || pure;
    p.n_threads = threads;
    p.allow_requantize = allow_requantize;
    if (!std::filesystem::exists(in)) throw std::runtime_error(fmt::format("input file '{}' does not exist", in));
    if (std::filesystem::exists(out) && std::filesystem::equivalent(in, out))
      throw std::runtime_error(fmt::format("output '{}' is the input file", out));

    std::fprintf(stderr, "minfer-quantize: %s -> %s as %s%s (general.file_type %u)\n", in.c_str(), out.c_str(),
                 p.target.name.c_str(), p.target.pure ? " (pure)" : "", static_cast<unsigned>(p.target.ftype));
    const auto sum = quantize::quantize_file(in, out, p, [&](const quantize::TensorReport& r) {
      if (!quiet) std::fprintf(stderr, "%s\n", quantize::format_tensor_line(r).c_str());
    });
    std::fputs(quantize::format_summary(sum).c_str(), stdout);
    return 0;
  });
}
