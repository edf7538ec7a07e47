// Shared pieces of the example programs: llama.cpp-style flags, model loading, error handling.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tensor/backend.h"
#include "tokenizer/tokenizer.h"

namespace minfer::examples {

struct ModelArgs {
  std::string model;          ///< -m; empty: the default model
  std::string device = "auto";
  int threads = 0;            ///< -t
  int n_ctx = 0;              ///< -c
  int n_batch = 512;          ///< -b
  std::string kv_type = "f16";
  int block_size = 32;        ///< --block-size: KV cells per block
  RopeOverrides rope;         ///< --rope-scaling, --rope-scale, --yarn-* (rope_flags.h)
};

/// -m -c -b -t --device --cache-type --block-size and the RoPE scaling flags (add_rope_flags).
void add_model_flags(CLI::App& app, ModelArgs& a);
/// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --presence-penalty
/// --frequency-penalty --seed.
void add_sampling_flags(CLI::App& app, SamplerParams& p);

/// The small model committed in the repo (tests/data/qwen3-xs-f16.gguf): $MINFER_DEFAULT_MODEL,
/// else the source tree's copy, else next to the executable.
std::string default_model_path();

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::optional<tokenizer::Tokenizer> tok;
  double load_ms = 0;
};

/// Opens the GGUF, creates the backend and the model, and the tokenizer. Throws with a clear
/// message for a missing file, a non-GGUF file or an unsupported architecture.
Loaded load_model(const ModelArgs& a);

/// A draft model for speculative decoding, on the target's backend.
struct LoadedDraft {
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::optional<tokenizer::Tokenizer> tok;
};

/// Opens the draft GGUF at `path` like load_model, checks its vocabulary against the target's
/// (check_draft_vocab) and loads it on target.backend. Throws std::runtime_error naming both files
/// when the vocabularies differ.
LoadedDraft load_draft(const std::string& path, const Loaded& target);

SessionParams session_params(const ModelArgs& a);

/// argv with llama.cpp's multi-letter single-dash flags ("-md", "-ub", "-npl", ...) spelled with
/// two dashes, which is how CLI11 (which reads "-md" as "-m d") declares them. `av` points into
/// `args`; pass av.size() and av.data() to MINFER_PARSE.
struct Args {
  std::vector<std::string> args;
  std::vector<char*> av;
};
Args llama_flags(int argc, char** argv, std::initializer_list<std::string_view> multi_letter);

/// CLI11_PARSE with the programs' one exit code for bad input: 0 after --help, 1 (with CLI11's
/// message on stderr) for an unknown flag or a bad value, as for every other error.
#define MINFER_PARSE(app, argc, argv)           \
  do {                                          \
    try {                                       \
      (app).parse((argc), (argv));              \
    } catch (const CLI::ParseError& e) {        \
      return (app).exit(e) == 0 ? 0 : 1;        \
    }                                           \
  } while (0)

/// Runs `body`, turning exceptions into "error: <message>" on stderr and exit code 1.
int run_main(const std::function<int()>& body);

}  // namespace minfer::examples
