#include "common/common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/rope_flags.h"
#include "models/registry.h"
#include "ops/cpu/thread_pool.h"
#include "runtime/backends.h"
#include "runtime/speculative.h"

namespace minfer::examples {

void add_model_flags(CLI::App& app, ModelArgs& a) {
  app.add_option("-m,--model", a.model, "GGUF model file (default: the small model shipped in the repo)");
  app.option_defaults()->always_capture_default();
  app.add_option("-c,--ctx-size", a.n_ctx, "context size in tokens (0: the model's, capped by memory)")
      ->check(at_least(0));
  app.add_option("-b,--batch-size", a.n_batch, "max tokens per forward pass")->check(at_least(1));
  app.add_option("-t,--threads", a.threads, "CPU threads (0: all)")->check(thread_count());
  app.add_flag("--no-mmap,--mlock", a.no_effect,
               "accepted for llama.cpp's scripts: the CPU reads weights from the mapped file, a GPU gets them once");
  app.add_option("--device", a.device,
                 "cpu, cuda, cuda:N or auto (cuda when a GPU is present); a comma list (cpu,cpu or cuda:0,cuda:1) "
                 "runs one tensor-parallel rank on each (-sm tensor; GPUs exchange through NCCL)");
  app.add_option("--split-mode", a.split_mode,
                 "-sm: how a model spans the --device list: none, or tensor (attention heads and FFN columns split "
                 "across the devices, an all-reduce after each block); layer and row are llama.cpp's, not implemented")
      ->check(CLI::IsMember({"none", "layer", "row", "tensor"}));
  app.add_option("--tensor-split", a.tensor_split,
                 "-ts: each device's share, comma-separated (llama.cpp's spelling); tensor parallelism takes equal shares");
  app.add_option("--n-gpu-layers,--gpu-layers", a.n_gpu_layers,
                 "-ngl N, llama.cpp's layer offload: 0 runs on the CPU, any other value puts every layer on the GPU "
                 "(same as --device auto); minfer does not split a model between CPU and GPU")
      ->check(at_least(0));
  app.add_option("--cache-type", a.kv_type, "KV cache dtype: f16, f32 or q8_0")
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  app.add_option("--block-size", a.block_size, "KV cache cells per block (a power of two)")
      ->check(CLI::IsMember({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}));
  app.add_flag("--no-cuda-graphs", a.no_cuda_graphs, "CUDA: do not capture and replay CUDA graphs");
  app.add_flag("--no-fusion", a.no_fusion, "CUDA: run every basic op as its own kernel (no fused kernels)");
  app.add_flag("--cuda-profile", a.cuda_profile,
               "CUDA: print host and GPU time per graph (with --no-cuda-graphs: per kernel) to stderr at exit");
  add_rope_flags(app, a.rope);
}

LlamaArgs::LlamaArgs(int argc, char** argv) : args(argv, argv + argc) {
  static const std::pair<const char*, const char*> kLong[] = {
      {"-ngl", "--n-gpu-layers"}, {"-md", "--md"}, {"-np", "--parallel"}, {"-ub", "--ubatch-size"},
      {"-npp", "--npp"},          {"-ntg", "--ntg"}, {"-npl", "--npl"},      {"-pps", "--pps"},
      {"-sm", "--split-mode"},    {"-ts", "--tensor-split"}, {"-cb", "--cont-batching"}};
  for (size_t i = 1; i < args.size(); ++i) {
    for (const auto& [short_name, long_name] : kLong) {
      const std::string s = short_name;
      if (args[i] == s) args[i] = long_name;
      else if (args[i].rfind(s + "=", 0) == 0) args[i] = long_name + args[i].substr(s.size());
    }
  }
  for (auto& a : args) ptrs.push_back(a.data());
}

std::string resolve_device(const ModelArgs& a) {
  if (a.n_gpu_layers < 0) return a.device;
  if (a.n_gpu_layers == 0) {
    if (a.device != "auto" && a.device != "cpu")
      throw std::invalid_argument(fmt::format("-ngl 0 (CPU) contradicts --device {}", a.device));
    return "cpu";
  }
  if (a.device == "cpu") throw std::invalid_argument(fmt::format("-ngl {} (GPU) contradicts --device cpu", a.n_gpu_layers));
  return a.device;
}

void add_sampling_flags(CLI::App& app, SamplerParams& p) {
  app.add_option("--temp", p.temp, "temperature (<= 0: greedy)")->capture_default_str();
  app.add_option("--top-k", p.top_k, "top-k (<= 0: off)");
  app.add_option("--top-p", p.top_p, "top-p (>= 1: off)");
  app.add_option("--min-p", p.min_p, "min-p (<= 0: off)")->check(at_most(1));
  app.add_option("--repeat-penalty", p.repeat_penalty, "repeat penalty (1: off)");
  app.add_option("--repeat-last-n", p.repeat_last_n, "tokens the penalties look back (-1: all)");
  app.add_option("--presence-penalty", p.presence_penalty, "presence penalty");
  app.add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty");
  app.add_option("-s,--seed", p.seed, "RNG seed (default: random, printed at start)")->check(seed_value());
}

std::string default_model_path() {
  if (const char* e = std::getenv("MINFER_DEFAULT_MODEL"); e && *e) return e;
  const std::filesystem::path src = MINFER_SOURCE_DIR "/tests/data/qwen3-xs-f16.gguf";
  if (std::filesystem::exists(src)) return src.string();
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (auto p : {exe.parent_path() / "qwen3-xs-f16.gguf", exe.parent_path() / "../data/qwen3-xs-f16.gguf"})
      if (std::filesystem::exists(p)) return p.string();
  }
  return src.string();
}

namespace {

// Opens a model GGUF after checking that it exists and that its architecture is one we build.
std::shared_ptr<const gguf::File> open_model_file(const std::string& path, std::string_view what) {
  if (!std::filesystem::exists(path)) {
    // llama.cpp's older --draft N was a token count: say so when the "file" is a number.
    const bool number = !path.empty() && path.find_first_not_of("0123456789") == std::string::npos;
    const char* hint =
        number && what == "draft model" ? " (--draft names the draft model; drafted tokens are --draft-max)" : "";
    throw std::runtime_error(fmt::format("{} file '{}' does not exist{}", what, path, hint));
  }
  auto file = std::make_shared<const gguf::File>(path);
  models::check_architecture(*file);
  return file;
}

}  // namespace

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The devices of the ranks: one without tensor parallelism. Checks -sm and -ts against them.
std::vector<std::string> rank_devices(const ModelArgs& a) {
  const std::string device = resolve_device(a);
  auto devices = split_list(device);
  if (devices.empty()) throw std::invalid_argument(fmt::format("--device '{}' names no device", device));
  if (a.split_mode == "layer" || a.split_mode == "row")
    throw std::invalid_argument(fmt::format("-sm {} is not implemented: minfer splits a model across devices by tensors "
                                            "(-sm tensor) or not at all (-sm none)",
                                            a.split_mode));
  if (devices.size() > 1 && a.split_mode != "tensor")
    throw std::invalid_argument(fmt::format("--device lists {} devices: add -sm tensor to split the model across them",
                                            devices.size()));
  if (!a.tensor_split.empty() && devices.size() > 1) {  // one device: ignored, as llama.cpp does
    const auto shares = split_list(a.tensor_split);
    bool equal = shares.size() == devices.size();
    for (const auto& sh : shares) {
      double v = 0;
      try {
        v = std::stod(sh);
      } catch (const std::exception&) {
        throw std::invalid_argument(fmt::format("-ts '{}': '{}' is not a number", a.tensor_split, sh));
      }
      equal = equal && v > 0 && v == std::stod(shares[0]);
    }
    if (!equal)
      throw std::invalid_argument(fmt::format("-ts '{}' must give each of the {} devices the same positive share "
                                              "(tensor parallelism splits the heads evenly), e.g. -ts {}",
                                              a.tensor_split, devices.size(), fmt::join(std::vector<int>(devices.size(), 1), ",")));
  }
  return devices;
}

}  // namespace

std::string Loaded::device_names() const {
  std::string names(backend->name());
  for (const auto& b : rank_backends) names += "," + std::string(b->name());
  return names;
}

std::vector<const Model*> Loaded::ranks() const {
  std::vector<const Model*> v{model.get()};
  for (const auto& m : rank_models) v.push_back(m.get());
  return v;
}

std::unique_ptr<ModelRunner> Loaded::runner(const RunnerParams& p) const {
  if (!group) return std::make_unique<ModelRunner>(*model, *backend, p);
  return std::make_unique<ModelRunner>(ranks(), group, p);
}

Loaded load_model(const ModelArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  const auto devices = rank_devices(a);
  const int n = static_cast<int>(devices.size());
  Loaded l;
  l.file = open_model_file(path, "model");
  l.tok.emplace(tokenizer::Tokenizer::from_gguf(*l.file));
  BackendOptions bo;
  // The ranks of one host share its cores.
  bo.n_threads = a.threads > 0 || n == 1 ? a.threads : std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) / n);
  bo.cuda_graphs = !a.no_cuda_graphs;
  bo.fusion = !a.no_fusion;
  bo.cuda_profile = a.cuda_profile;
  // The group before the backends: CPU ranks share a HostCollective, CUDA ranks one NCCL
  // communicator each (create_group refuses a mix, and says how many GPUs are missing).
  if (n > 1) l.group = create_group(devices);
  // Every device first, so a device that does not exist or cannot join the group is the error
  // rather than something about the model.
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < n; ++r) {
    auto backend = create_backend(devices[static_cast<size_t>(r)], bo);
    if (l.group) {
      try {
        backend->join(l.group, r);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(
            fmt::format("-sm tensor over --device {}: {} (docs/tensor-parallel.md)", resolve_device(a), e.what()));
      }
    }
    backends.push_back(std::move(backend));
  }
  for (int r = 0; r < n; ++r) {
    auto& backend = backends[static_cast<size_t>(r)];
    auto model = models::load(l.file, *backend, Shard{r, n});
    if (a.rope.any()) model->override_rope(a.rope);
    if (r == 0) {
      l.backend = std::move(backend);
      l.model = std::move(model);
    } else {
      l.rank_backends.push_back(std::move(backend));
      l.rank_models.push_back(std::move(model));
    }
  }
  if (a.n_ctx > l.model->hparams().n_ctx_train)
    std::fprintf(stderr, "warning: -c %d exceeds the context the model was trained with (%d); quality will drop past it\n",
                 a.n_ctx, l.model->hparams().n_ctx_train);
  l.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return l;
}

LoadedDraft load_draft(const std::string& path, const Loaded& target) {
  LoadedDraft d;
  d.file = open_model_file(path, "draft model");
  d.tok.emplace(tokenizer::Tokenizer::from_gguf(*d.file));
  try {
    check_draft_vocab(*target.tok, *d.tok);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("draft model '{}' cannot draft for target '{}': {}", path, target.file->name(), e.what()));
  }
  d.model = models::load(d.file, *target.backend);
  return d;
}

SessionParams session_params(const ModelArgs& a) {
  SessionParams p;
  p.n_ctx = a.n_ctx;
  p.n_batch = a.n_batch;
  auto t = dtype_from_name(a.kv_type);
  if (!t) throw std::invalid_argument(fmt::format("--cache-type {}: unknown dtype", a.kv_type));
  p.kv_type = *t;
  p.block_size = a.block_size;
  return p;
}

std::vector<int> parse_int_list(const std::string& s, std::string_view flag) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    int x = -1;
    try {
      x = std::stoi(item, &used);
    } catch (const std::exception&) {
    }
    if (used != item.size() || x < 0)
      throw std::invalid_argument(fmt::format("{} '{}' is not a list of non-negative numbers", flag, s));
    v.push_back(x);
  }
  return v;
}

std::string read_text_file(const std::string& path, std::string_view flag) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(fmt::format("{} '{}' is a directory, not a text file", flag, path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read '{}'", flag, path));
  // Read in pieces up to one byte past the limit: the size of a pipe or device is not known ahead.
  std::string text;
  std::vector<char> piece(size_t{1} << 20);
  while (in && text.size() <= kMaxTextFileBytes) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    text.append(piece.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw std::runtime_error(fmt::format("{}: error reading '{}'", flag, path));
  if (text.size() > kMaxTextFileBytes)
    throw std::runtime_error(fmt::format("{}: '{}' is longer than {} MiB, more than a text file this program reads", flag,
                                         path, kMaxTextFileBytes >> 20));
  return text;
}

void take_last_values(CLI::App& app) {
  for (CLI::Option* o : app.get_options())
    if (o->get_items_expected_max() == 1) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

CLI::Validator thread_count() {
  constexpr int hi = cpu::ThreadPool::kMaxThreads;
  return detail::number_check("0 (all) to " + std::to_string(hi), [](double v) { return v >= 0 && v <= hi; });
}

int run_main(const std::function<int()>& body) {
  int rc = 1;
  try {
    rc = body();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  // Output that could not be written (a full disk, a closed pipe) is an error, as for coreutils:
  // exiting 0 would tell a script its file is complete.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "error: writing the output: %s\n", std::strerror(errno));
    return 1;
  }
  return rc;
}

}  // namespace minfer::examples
