// Load a GGUF model and generate, using the installed minfer package (docs/library.md).
//   generate MODEL.gguf "prompt" [n_tokens]
#include <cstdio>
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "models/registry.h"
#include "runtime/backends.h"
#include "runtime/generate.h"

int main(int argc, char** argv) {
  if (argc < 3) return std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N]\n", argv[0]), 1;
  try {
    auto file = std::make_shared<const minfer::gguf::File>(argv[1]);
    auto tok = minfer::tokenizer::Tokenizer::from_gguf(*file);
    auto backend = minfer::create_backend("auto");  // CUDA when built and present, else CPU
    auto model = minfer::models::load(file, *backend);
    minfer::Session session(*model, *backend, minfer::SessionParams{});
    minfer::SamplerParams sp;
    sp.temp = 0;  // greedy
    minfer::Sampler sampler(sp);
    minfer::GenerateParams gp;
    gp.n_predict = argc > 3 ? std::stoi(argv[3]) : 32;
    const auto ids = tok.with_bos(tok.encode(argv[2], /*parse_special=*/true));
    auto r = minfer::generate(session, tok, sampler, ids, gp, [](std::string_view s) {
      std::fwrite(s.data(), 1, s.size(), stdout);  // streamed as it is generated
    });
    std::printf("\n[%zu tokens, %.1f tok/s, stop: %s]\n", r.ids.size(), r.decode_tok_s(), r.stop_reason.c_str());
  } catch (const std::exception& e) {
    return std::fprintf(stderr, "error: %s\n", e.what()), 1;
  }
}
