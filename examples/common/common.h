// Shared pieces of the example programs: llama.cpp-style flags, model loading, error handling.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/flag_checks.h"
#include "gguf/gguf.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tensor/backend.h"
#include "tensor/collective.h"
#include "tokenizer/tokenizer.h"

namespace minfer::examples {

struct ModelArgs {
  std::string model;          ///< -m; empty: the default model
  std::string device = "auto";  ///< --device: one device, or a comma list (one rank each, -sm tensor)
  std::string split_mode = "none";  ///< -sm: none, layer, row or tensor (only tensor splits; see load_model)
  std::string tensor_split;         ///< -ts: each device's share, e.g. "1,1" (tensor parallelism: equal shares)
  int threads = 0;            ///< -t
  int n_ctx = 0;              ///< -c
  int n_batch = 512;          ///< -b
  std::string kv_type = "f16";
  int n_gpu_layers = -1;      ///< -ngl: 0 = CPU, > 0 = every layer on the GPU, -1 = not given
  int block_size = 32;        ///< --block-size: KV cells per block
  bool no_cuda_graphs = false;  ///< --no-cuda-graphs
  bool no_fusion = false;       ///< --no-fusion
  int no_effect = 0;            ///< --no-mmap / --mlock: llama.cpp flags accepted, nothing to do
  bool cuda_profile = false;    ///< --cuda-profile
  RopeOverrides rope;         ///< --rope-scaling, --rope-scale, --yarn-* (rope_flags.h)
};

/// -m -c -b -t --device --cache-type -ngl --block-size, the backend switches (--no-cuda-graphs,
/// --no-fusion, --cuda-profile) and the RoPE scaling flags
/// (add_rope_flags). --cache-type is checked while parsing (before any output), -c against the
/// model in session_params().
void add_model_flags(CLI::App& app, ModelArgs& a);
/// The backend a program uses: --device, or "cpu" for -ngl 0 (llama.cpp's spelling). Throws
/// std::invalid_argument when -ngl and --device contradict each other.
std::string resolve_device(const ModelArgs& a);
/// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --presence-penalty
/// --frequency-penalty --seed.
void add_sampling_flags(CLI::App& app, SamplerParams& p);

/// The small model committed in the repo (tests/data/qwen3-xs-f16.gguf): $MINFER_DEFAULT_MODEL,
/// else the source tree's copy, else next to the executable.
std::string default_model_path();

struct Loaded {
  std::unique_ptr<Backend> backend;  ///< rank 0's (the only one without tensor parallelism)
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;      ///< rank 0's shard (hparams() are that rank's share)
  std::optional<tokenizer::Tokenizer> tok;
  double load_ms = 0;
  /// Tensor parallelism (-sm tensor over several --device entries): ranks 1.. and their group.
  std::vector<std::unique_ptr<Backend>> rank_backends;
  std::vector<std::unique_ptr<Model>> rank_models;
  std::shared_ptr<Collective> group;

  /// The backends' names, rank 0 first, comma-separated ("cpu", "cpu,cpu").
  std::string device_names() const;
  /// The ranks' models, rank 0 first.
  std::vector<const Model*> ranks() const;
  /// A runner over every rank (ModelRunner's constructors; throws what they throw).
  std::unique_ptr<ModelRunner> runner(const RunnerParams& p) const;
};

/// Opens the GGUF, creates the backend(s) and the model, and the tokenizer. Throws with a clear
/// message for a missing file, a non-GGUF file or an unsupported architecture. With several
/// devices (`--device cpu,cpu`) and -sm tensor each device is one rank of a tensor-parallel split
/// (docs/tensor-parallel.md): CPU ranks share a HostCollective, CUDA ranks (--device
/// cuda:0,cuda:1) an NCCL group (runtime/backends.h create_group). std::invalid_argument for
/// several devices without -sm tensor, a -ts that does not give every device the same share, a
/// mix of CPU and CUDA devices or a device that cannot join a group; std::runtime_error when
/// fewer GPUs exist than are listed or NCCL is missing or fails.
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

/// "512,2048" -> {512, 2048}; empty items are skipped. Throws std::invalid_argument naming `flag`
/// for anything but non-negative integers.
std::vector<int> parse_int_list(const std::string& s, std::string_view flag);

/// The largest text file read_text_file() takes (256 MiB, ~200 times wikitext-2's test set): past
/// it a prompt or corpus is a mistake (a device such as /dev/zero, the wrong file), refused before
/// it exhausts memory.
inline constexpr size_t kMaxTextFileBytes = size_t{256} << 20;

/// The bytes of the text file at `path` (given as `flag`). Throws std::runtime_error naming the
/// flag and the path when it is missing, a directory, unreadable or longer than kMaxTextFileBytes.
std::string read_text_file(const std::string& path, std::string_view flag);

/// argv with llama.cpp's multi-letter short flags (-ngl, -md, -np, -ub, -npp, ...) rewritten to their long
/// forms, which CLI11 cannot take as short names. Keep it alive while the app parses.
struct LlamaArgs {
  LlamaArgs(int argc, char** argv);
  int argc() const { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
  std::vector<std::string> args;
  std::vector<char*> ptrs;
};

/// A flag given twice takes its last value, as llama.cpp's programs do (CLI11 refuses a repeated
/// single-value option: scripts that append an override, `-n 4 ... -n 8`, would fail). Options
/// that take lists (`-p 512,2048`) keep every value.
void take_last_values(CLI::App& app);

/// CLI11_PARSE with the programs' one exit code for bad input: 0 after --help, 1 (with CLI11's
/// message on stderr) for an unknown flag or a bad value, as for every other error.
#define MINFER_PARSE(app, argc, argv)           \
  do {                                          \
    ::minfer::examples::take_last_values(app);  \
    try {                                       \
      (app).parse((argc), (argv));              \
    } catch (const CLI::ParseError& e) {        \
      return (app).exit(e) == 0 ? 0 : 1;        \
    }                                           \
  } while (0)

/// -t / --threads: 0 (every hardware thread) up to cpu::ThreadPool::kMaxThreads (512, ggml's
/// GGML_MAX_N_THREADS): a typo such as -t 100000 is an error, not 100,000 threads.
CLI::Validator thread_count();

/// Runs `body`, turning exceptions into "error: <message>" on stderr and exit code 1; stdout
/// that could not be written (a full disk, /dev/full) is an error too (exit code 1).
int run_main(const std::function<int()>& body);

}  // namespace minfer::examples
