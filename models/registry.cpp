#include "models/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gguf/gguf.h"
#include "models/llama/llama.h"
#include "models/qwen2/qwen2.h"
#include "models/qwen3/qwen3.h"
#include "models/qwen3moe/qwen3moe.h"

namespace minfer::models {
namespace {

// Adding an architecture: one line here (docs/new-model.md).
const std::map<std::string, Factory>& table() {
  static const std::map<std::string, Factory> t = {
      {"llama", &make_llama},
      {"qwen2", &make_qwen2},
      {"qwen3", &make_qwen3},
      {"qwen3moe", &make_qwen3moe},
  };
  return t;
}

}  // namespace

std::vector<std::string> architectures() {
  std::vector<std::string> r;
  for (const auto& [k, v] : table()) r.push_back(k);
  return r;
}

void check_architecture(const gguf::File& file) {
  const std::string arch(file.get_string_or("general.architecture", ""));
  if (table().contains(arch)) return;
  std::string list;
  for (const auto& a : architectures()) list += (list.empty() ? "" : ", ") + a;
  // {:?} escapes the file's bytes: a NUL in the name used to end the message there.
  throw std::runtime_error(fmt::format("{}: unsupported architecture {:?} (supported: {})", file.name(), arch, list));
}

std::unique_ptr<Model> load(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard) {
  check_architecture(*file);
  const std::string arch(file->get_string("general.architecture"));
  auto model = table().at(arch)(std::move(file), backend, shard);
  // A tensor no block loaded would be silently dropped from the computation.
  if (const auto unused = model->weights().unused(); !unused.empty()) {
    std::string list;
    for (size_t i = 0; i < unused.size() && i < 4; ++i) list += (i ? ", '" : "'") + unused[i] + "'";
    throw std::runtime_error(fmt::format("{}: {} tensor(s) that the {} model does not use: {}{}", model->weights().file().name(),
                                         unused.size(), arch, list, unused.size() > 4 ? ", ..." : ""));
  }
  return model;
}

}  // namespace minfer::models
