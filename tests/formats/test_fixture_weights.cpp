// Every tensor of every fixture GGUF dequantizes to finite values; every quantized fixture's
// weights decode to the nearest level of their block's grid around the f16 weights of the same
// model (llama-quantize's files, so an independent encoder); relative RMSE per type is printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "tensor/fp16.h"
#include "tensor/quants.h"

namespace minfer::test {
namespace {

std::vector<float> decode(const gguf::TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  dequantize_row(t.type, t.data, v.data(), t.nelements());
  return v;
}

TEST(FixtureWeights, EveryTensorOfEveryFileDequantizes) {
  const auto dir = fixtures_dir();
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "fixtures not found under " << dir;
  int files = 0, tensors = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    gguf::File f(e.path());
    ++files;
    for (const auto& t : f.tensors()) {
      auto v = decode(t);
      for (size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << f.name() << " " << t.name << " [" << i << "]";
      ++tensors;
    }
  }
  std::printf("[ formats ] %d files, %d tensors dequantized\n", files, tensors);
  EXPECT_GE(files, 9);
}

// The grid of element i of a block: value = a * q + b for integer q in [qmin, qmax].
struct Grid {
  float a, b;
  int qmin, qmax;
};

float h(const uint8_t* p) {
  uint16_t u;
  std::memcpy(&u, p, 2);
  return f16_to_f32(u);
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K block (GGUF's 12-byte packing).
void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

Grid grid_of(DType t, const uint8_t* blk, int i) {
  switch (t) {
    case DType::Q4_0: return {h(blk), -8 * h(blk), 0, 15};
    case DType::Q4_1: return {h(blk), h(blk + 2), 0, 15};
    case DType::Q5_0: return {h(blk), -16 * h(blk), 0, 31};
    case DType::Q5_1: return {h(blk), h(blk + 2), 0, 31};
    case DType::Q8_0: return {h(blk), 0, -128, 127};
    case DType::Q4_K:
    case DType::Q5_K: {
      int sc, m;
      scale_min_k4(i / 32, blk + 4, sc, m);
      return {h(blk) * static_cast<float>(sc), -h(blk + 2) * static_cast<float>(m), 0, t == DType::Q4_K ? 15 : 31};
    }
    case DType::Q6_K: {
      const float a = h(blk + 208) * static_cast<float>(static_cast<int8_t>(blk[192 + i / 16]));
      return {a, -32 * a, 0, 63};
    }
    default: throw std::invalid_argument("no grid for " + std::string(dtype_name(t)));
  }
}

struct Pair {
  const char* quant;
  const char* f16;
};

TEST(FixtureWeights, QuantizedWeightsSitOnTheNearestGridLevelOfTheF16Weights) {
  const Pair pairs[] = {{"qwen2-s/qwen2-s-Q4_K_M.gguf", "qwen2-s/qwen2-s-f16.gguf"},
                        {"qwen2-s/qwen2-s-Q5_K_M.gguf", "qwen2-s/qwen2-s-f16.gguf"},
                        {"qwen3-xs/qwen3-xs-Q8_0.gguf", "qwen3-xs/qwen3-xs-f16.gguf"},
                        {"qwen3-xs/qwen3-xs-Q4_0.gguf", "qwen3-xs/qwen3-xs-f16.gguf"},
                        {"qwen3-xs/qwen3-xs-Q5_1.gguf", "qwen3-xs/qwen3-xs-f16.gguf"}};
  struct Acc {
    double err2 = 0, ref2 = 0;
    int64_t n = 0;
  };
  std::map<std::string, Acc> by_type;
  for (const Pair& p : pairs) {
    auto qp = fixture(p.quant), fp = fixture(p.f16);
    if (qp.empty() || fp.empty()) GTEST_SKIP() << "fixtures not found under " << fixtures_dir();
    gguf::File qf(qp), ff(fp);
    for (const auto& t : qf.tensors()) {
      if (!dtype_is_quantized(t.type)) continue;
      const gguf::TensorInfo& ft = ff.tensor(t.name);
      const auto x = decode(ft), y = decode(t);
      const int64_t bs = dtype_block_size(t.type);
      const size_t ts = dtype_type_size(t.type);
      int64_t bad = 0;
      for (int64_t e = 0; e < t.nelements(); ++e) {
        const uint8_t* blk = t.data + static_cast<size_t>(e / bs) * ts;
        const Grid g = grid_of(t.type, blk, static_cast<int>(e % bs));
        const float xe = x[static_cast<size_t>(e)], ye = y[static_cast<size_t>(e)];
        // Distance from x to the nearest level of the grid (levels outside [qmin, qmax] do not exist).
        float nearest = g.b;
        if (g.a != 0) {
          const float q = std::min<float>(g.qmax, std::max<float>(g.qmin, std::nearbyint((xe - g.b) / g.a)));
          nearest = g.a * q + g.b;
        }
        // The legacy encoders pick q with the unrounded scale, then store the scale as f16
        // (relative error <= 2^-11): a level may move by |q| * |a| * 2^-11 from where q was chosen.
        const float slack = static_cast<float>(std::max(std::abs(g.qmin), std::abs(g.qmax))) * std::abs(g.a) / 1024.0f + 1e-6f;
        if (std::abs(ye - xe) > std::abs(nearest - xe) + slack) ++bad;
        Acc& acc = by_type[std::string(dtype_name(t.type))];
        acc.err2 += static_cast<double>(ye - xe) * (ye - xe);
        acc.ref2 += static_cast<double>(xe) * xe;
        ++acc.n;
      }
      EXPECT_EQ(bad, 0) << p.quant << " " << t.name << " (" << dtype_name(t.type) << "): elements off the nearest level";
    }
  }
  for (const auto& [type, a] : by_type)
    std::printf("[ formats ] %-5s relative RMSE vs f16 weights %.3f%% over %lld elements\n", type.c_str(),
                100.0 * std::sqrt(a.err2 / a.ref2), static_cast<long long>(a.n));
}

}  // namespace
}  // namespace minfer::test
