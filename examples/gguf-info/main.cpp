// minfer-gguf-info: prints a GGUF file's header, every metadata key (arrays abbreviated) and the
// tensor table, as text or JSON. A file that fails validation prints the reader's error to stderr
// and exits with 1; a usage error exits with 2.
//   minfer-gguf-info model.gguf
//   minfer-gguf-info --no-tensors --max-elems 16 model.gguf
//   minfer-gguf-info --json model.gguf | jq '.tensors[] | select(.type == "q4_K") | .name'
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf.h"

namespace {

using minfer::gguf::File;
using minfer::gguf::Value;
using minfer::gguf::ValueType;

std::string shape_string(const minfer::gguf::TensorInfo& t) {
  std::string s;
  for (int d = 0; d < t.n_dims; ++d) s += (d ? " x " : "") + std::to_string(t.ne[d]);
  return s;
}

nlohmann::ordered_json scalar_json(const Value& v) {
  switch (v.type()) {
    case ValueType::BOOL: return v.as<bool>();
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return v.as<double>();
    case ValueType::STRING: return std::string(v.as_string());
    case ValueType::UINT64: return v.as<uint64_t>();
    default: return v.as<int64_t>();
  }
}

template <class T>
void append_head(nlohmann::ordered_json& head, const std::vector<T>& a, size_t n) {
  for (size_t i = 0; i < n; ++i) head.push_back(static_cast<T>(a[i]));
}

nlohmann::ordered_json array_head_json(const Value& v, size_t max_elems) {
  nlohmann::ordered_json head = nlohmann::ordered_json::array();
  const ValueType et = v.array_type();
  const size_t n = static_cast<size_t>(std::min<uint64_t>(v.array_size(), max_elems));
  if (et == ValueType::STRING) {
    const auto all = v.as_string_array();
    for (size_t i = 0; i < n; ++i) head.push_back(std::string(all[i]));
    return head;
  }
  switch (et) {
    case ValueType::BOOL: append_head(head, v.as_array<bool>(), n); break;
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: append_head(head, v.as_array<double>(), n); break;
    case ValueType::UINT64: append_head(head, v.as_array<uint64_t>(), n); break;
    default: append_head(head, v.as_array<int64_t>(), n);
  }
  return head;
}

void print_json(const File& f, bool tensors, size_t max_elems) {
  nlohmann::ordered_json j;
  j["file"] = f.name();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["n_kv"] = f.n_kv();
  j["n_tensors"] = f.n_tensors();
  nlohmann::ordered_json kvs = nlohmann::ordered_json::array();
  for (const Value& v : f.kvs()) {
    nlohmann::ordered_json e;
    e["key"] = std::string(v.key());
    e["type"] = std::string(value_type_name(v.type()));
    if (v.is_array()) {
      e["element_type"] = std::string(value_type_name(v.array_type()));
      e["length"] = v.array_size();
      e["head"] = array_head_json(v, max_elems);
    } else {
      e["value"] = scalar_json(v);
    }
    kvs.push_back(std::move(e));
  }
  j["metadata"] = std::move(kvs);
  if (tensors) {
    nlohmann::ordered_json ts = nlohmann::ordered_json::array();
    size_t i = 0;
    for (const auto& t : f.tensors()) {
      ts.push_back({{"index", i++},
                    {"name", t.name},
                    {"type", std::string(minfer::dtype_name(t.type))},
                    {"shape", std::vector<int64_t>(t.ne, t.ne + t.n_dims)},
                    {"nbytes", t.nbytes},
                    {"offset", t.offset}});
    }
    j["tensors"] = std::move(ts);
  }
  // File strings need not be valid UTF-8: replace bad bytes instead of throwing.
  std::fputs(j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str(), stdout);
  std::fputc('\n', stdout);
}

void print_text(const File& f, bool tensors, size_t max_elems) {
  fmt::print("file:        {}\n", f.name());
  fmt::print("version:     {}\n", f.version());
  fmt::print("alignment:   {}\n", f.alignment());
  fmt::print("data offset: {}\n", f.data_offset());
  fmt::print("n_kv:        {}\n", f.n_kv());
  fmt::print("n_tensors:   {}\n", f.n_tensors());
  fmt::print("\nmetadata:\n");
  size_t kw = 0;
  for (const Value& v : f.kvs()) kw = std::max(kw, v.key().size());
  kw = std::min<size_t>(kw, 60);
  for (const Value& v : f.kvs())
    fmt::print("  {:<{}}  {:<7}  {}\n", v.key(), kw, value_type_name(v.type()),
               v.to_string(max_elems, 80));
  if (!tensors) return;
  fmt::print("\ntensors:\n");
  size_t nw = 4, sw = 5;
  for (const auto& t : f.tensors()) {
    nw = std::max(nw, t.name.size());
    sw = std::max(sw, shape_string(t).size());
  }
  fmt::print("  {:>5}  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", "index", "name", nw, "dtype",
             "shape", sw, "bytes", "offset");
  size_t i = 0;
  uint64_t total = 0;
  for (const auto& t : f.tensors()) {
    fmt::print("  {:>5}  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", i++, t.name, nw,
               minfer::dtype_name(t.type), shape_string(t), sw, t.nbytes, t.offset);
    total += t.nbytes;
  }
  fmt::print("\ntotal tensor bytes: {} ({:.2f} MiB)\n", total, static_cast<double>(total) / (1 << 20));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Print the header, metadata and tensor table of a GGUF file"};
  std::string path;
  bool no_tensors = false, json = false;
  size_t max_elems = 8;
  app.add_option("file", path, "GGUF file")->required();
  app.add_flag("--no-tensors", no_tensors, "Do not print the tensor table");
  app.add_flag("--json", json, "Print JSON instead of text");
  app.add_option("--max-elems", max_elems, "Array elements to show per key")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help, or a usage error
  }
  try {
    const File f(path);
    if (json) print_json(f, !no_tensors, max_elems);
    else print_text(f, !no_tensors, max_elems);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "minfer-gguf-info: %s\n", e.what());
    return 1;
  }
  return 0;
}
