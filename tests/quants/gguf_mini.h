// A minimal GGUF v3 tensor index for the quants tests (not the project's GGUF reader): reads
// the header, skips the metadata, and returns each tensor's name, type, shape and bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace minfer::test {

struct MiniTensor {
  std::string name;
  int32_t type = 0;
  std::vector<int64_t> ne;
  const uint8_t* data = nullptr;
  int64_t nelements() const {
    int64_t n = 1;
    for (int64_t v : ne) n *= v;
    return n;
  }
};

class MiniGguf {
 public:
  explicit MiniGguf(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    bytes_.assign(std::istreambuf_iterator<char>(f), {});
    if (bytes_.size() < 24 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) throw std::runtime_error("not GGUF: " + path);
    pos_ = 4;
    if (rd<uint32_t>() != 3) throw std::runtime_error("GGUF version is not 3");
    const uint64_t n_tensors = rd<uint64_t>(), n_kv = rd<uint64_t>();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; ++i) {
      const std::string key = str();
      const uint32_t t = rd<uint32_t>();
      if (key == "general.alignment" && t == 4) alignment = rd<uint32_t>();
      else skip(t);
    }
    std::vector<std::pair<MiniTensor, uint64_t>> infos;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      MiniTensor mt;
      mt.name = str();
      const uint32_t nd = rd<uint32_t>();
      for (uint32_t d = 0; d < nd; ++d) mt.ne.push_back(static_cast<int64_t>(rd<uint64_t>()));
      mt.type = static_cast<int32_t>(rd<uint32_t>());
      infos.emplace_back(mt, rd<uint64_t>());
    }
    const size_t start = (pos_ + alignment - 1) / alignment * alignment;
    for (auto& [mt, off] : infos) {
      if (start + off > bytes_.size()) throw std::runtime_error("tensor data out of range: " + mt.name);
      mt.data = bytes_.data() + start + off;
      tensors_[mt.name] = mt;
    }
  }
  const std::map<std::string, MiniTensor>& tensors() const { return tensors_; }

 private:
  template <class T>
  T rd() {
    if (pos_ + sizeof(T) > bytes_.size()) throw std::runtime_error("truncated GGUF");
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = rd<uint64_t>();
    if (pos_ + n > bytes_.size()) throw std::runtime_error("truncated GGUF string");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void skip(uint32_t t) {
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (t == 8) {
      str();
    } else if (t == 9) {
      const uint32_t et = rd<uint32_t>();
      const uint64_t n = rd<uint64_t>();
      for (uint64_t i = 0; i < n; ++i) skip(et);
    } else if (t < 13) {
      pos_ += sizes[t];
    } else {
      throw std::runtime_error("bad GGUF value type");
    }
  }
  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
  std::map<std::string, MiniTensor> tensors_;
};

}  // namespace minfer::test
