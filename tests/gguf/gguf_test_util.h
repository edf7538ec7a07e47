// Helpers for the GGUF tests: a byte builder that assembles GGUF images field by field straight
// from the spec (independent of gguf::Writer), random bytes, and the fixtures directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace gguf_test {

// GGUF value type ids and ggml type ids, spelled out from the spec rather than taken from the
// library headers, so that a wrong constant in the library is caught.
enum : uint32_t {
  T_UINT8 = 0, T_INT8 = 1, T_UINT16 = 2, T_INT16 = 3, T_UINT32 = 4, T_INT32 = 5,
  T_FLOAT32 = 6, T_BOOL = 7, T_STRING = 8, T_ARRAY = 9, T_UINT64 = 10, T_INT64 = 11,
  T_FLOAT64 = 12,
};
enum : uint32_t { G_F32 = 0, G_F16 = 1, G_Q4_0 = 2, G_Q8_0 = 8, G_Q4_K = 12, G_Q6_K = 14 };

/// Little-endian byte builder. `marks` records the offset after every primitive field, so tests
/// can truncate a file at each field boundary.
struct Bytes {
  std::vector<uint8_t> b;
  std::vector<size_t> marks;

  size_t size() const { return b.size(); }
  Bytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    marks.push_back(b.size());
    return *this;
  }
  template <class T>
  Bytes& le(T v) {
    return raw(&v, sizeof v);
  }
  Bytes& u8(uint8_t v) { return le(v); }
  Bytes& u32(uint32_t v) { return le(v); }
  Bytes& u64(uint64_t v) { return le(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(T_UINT32).u32(v); }
  Bytes& kv_str(std::string_view key, std::string_view v) { return str(key).u32(T_STRING).str(v); }
  Bytes& tensor_info(std::string_view name, std::vector<uint64_t> ne, uint32_t type,
                     uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(type).u64(offset);
  }
  Bytes& pad_to(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    marks.push_back(b.size());
    return *this;
  }
};

/// A fresh random engine; the seed is printed so a failure can be replayed.
inline std::mt19937_64 make_rng() {
  const uint64_t seed = std::random_device{}();
  std::printf("[ rng seed ] %llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

/// `n` random bytes, never all zero.
inline std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  if (n) v[0] |= 1;
  return v;
}

/// $MINFER_FIXTURES, else the path configured at build time (<repo>/../shared/fixtures).
inline std::filesystem::path fixtures_dir() {
  if (const char* e = std::getenv("MINFER_FIXTURES"); e && *e) return e;
#ifdef MINFER_FIXTURES_DEFAULT
  return MINFER_FIXTURES_DEFAULT;
#else
  return "../shared/fixtures";
#endif
}

/// The whole file.
inline std::vector<uint8_t> read_all(const std::filesystem::path& p) {
  std::vector<uint8_t> out(std::filesystem::file_size(p));
  std::ifstream in(p, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  return out;
}

/// A fresh directory for files a test writes; removed by the caller's TempDir destructor.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("minfer-gguf-test-" + std::to_string(rd()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace gguf_test
