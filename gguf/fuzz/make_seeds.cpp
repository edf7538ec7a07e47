// Writes a few tiny valid GGUF files with gguf::Writer into the directory given as argv[1]:
// the seed corpus for fuzz_gguf_reader (see run.sh).
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"

using minfer::DType;
using minfer::gguf::Writer;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  try {
    {  // every scalar type + arrays, no tensors
      Writer w;
      w.set_u8("a.u8", 200);
      w.set_i8("a.i8", -3);
      w.set_u16("a.u16", 60000);
      w.set_i16("a.i16", -300);
      w.set_u32("a.u32", 4000000000u);
      w.set_i32("a.i32", -7);
      w.set_f32("a.f32", 1.5f);
      w.set_bool("a.bool", true);
      w.set_string("a.str", "hello");
      w.set_u64("a.u64", 1ull << 40);
      w.set_i64("a.i64", -(1ll << 40));
      w.set_f64("a.f64", 0.25);
      w.set_array<int32_t>("a.arr_i32", std::vector<int32_t>{1, -2, 3});
      w.set_array<float>("a.arr_f32", std::vector<float>{0.5f, -1.f});
      w.set_array<bool>("a.arr_bool", std::vector<bool>{true, false});
      w.set_string_array("a.arr_str", std::vector<std::string>{"x", "", "yz"});
      w.write(dir + "/kvs.gguf");
    }
    {  // tensors of several dtypes, default alignment
      Writer w;
      w.set_string("general.architecture", "qwen3");
      w.set_u32("qwen3.block_count", 1);
      w.add_tensor("f32", DType::F32, {4, 2}, bytes.data());
      w.add_tensor("f16", DType::F16, {3}, bytes.data());
      w.add_tensor("q8_0", DType::Q8_0, {32, 2}, bytes.data());
      w.add_tensor("q4_K", DType::Q4_K, {256}, bytes.data());
      w.add_tensor("empty", DType::F32, {0, 5}, bytes.data());
      w.write(dir + "/tensors.gguf");
    }
    {  // alignment 16, 3-d and 4-d shapes
      Writer w;
      w.set_alignment(16);
      w.set_string_array("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b", "ab"});
      w.add_tensor("t3", DType::I32, {2, 3, 2}, bytes.data());
      w.add_tensor("t4", DType::BF16, {2, 1, 2, 2}, bytes.data());
      w.write(dir + "/align16.gguf");
    }
    {  // empty file body: header only
      Writer w;
      w.write(dir + "/empty.gguf");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
