#include "model_fixtures.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_util.h"

namespace minfer::test {

std::vector<RefCase> load_refs(const std::string& model_dir) {
  std::vector<RefCase> out;
  auto path = fixture(model_dir + "/refs.json");
  if (path.empty()) return out;
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  for (const auto& c : j.at("cases")) {
    RefCase r;
    r.prompt = c.at("prompt").get<std::string>();
    r.ids = c.at("ids").get<std::vector<int32_t>>();
    r.row_begin = c.at("logits_rows")[0].get<int32_t>();
    r.row_end = c.at("logits_rows")[1].get<int32_t>();
    r.vocab = c.at("vocab").get<int32_t>();
    r.greedy32 = c.at("greedy32").get<std::vector<int32_t>>();
    std::ifstream lf(path.parent_path() / c.at("logits_file").get<std::string>(), std::ios::binary);
    r.logits.resize(static_cast<size_t>(r.row_end - r.row_begin) * static_cast<size_t>(r.vocab));
    lf.read(reinterpret_cast<char*>(r.logits.data()), static_cast<std::streamsize>(r.logits.size() * 4));
    if (!lf) throw std::runtime_error("short logits file for " + model_dir);
    out.push_back(std::move(r));
  }
  return out;
}

std::shared_ptr<const gguf::File> open_fixture(const std::string& relative) {
  auto p = fixture(relative);
  if (p.empty()) return nullptr;
  return std::make_shared<const gguf::File>(p);
}

std::shared_ptr<const gguf::File> make_random_model(const quantize::MakeModelParams& p) {
  static std::atomic<int> n{0};
  const auto path = std::filesystem::temp_directory_path() /
                    ("minfer-random-model-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".gguf");
  quantize::make_model(p, path);
  auto file = std::make_shared<const gguf::File>(path);
  std::filesystem::remove(path);
  return file;
}

HParams minimal_qwen2_hparams(const std::function<void(gguf::Writer&)>& keys) {
  gguf::Writer w;
  w.set_string("general.architecture", "qwen2");
  w.set_u32("qwen2.block_count", 1);
  w.set_u32("qwen2.context_length", 4096);
  w.set_u32("qwen2.embedding_length", 64);
  w.set_u32("qwen2.feed_forward_length", 128);
  w.set_u32("qwen2.attention.head_count", 2);
  w.set_f32("qwen2.rope.freq_base", 1e6f);
  keys(w);
  std::vector<float> emb(64 * 4, 0.5f);
  w.add_tensor("token_embd.weight", DType::F32, {64, 4}, emb.data());
  const auto path = std::filesystem::temp_directory_path() /
                    ("minfer_hparams_" + std::to_string(getpid()) + "_" + std::to_string(seed()) + ".gguf");
  w.write(path);
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  return HParams::from_gguf(gguf::File(path), ops::RopeMode::NEOX);
}

}  // namespace minfer::test
