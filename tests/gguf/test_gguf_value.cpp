// The typed getters: integer conversions that fit, clear errors (key + actual type) otherwise,
// optional/defaulted variants, iteration and rendering.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace {

using namespace gguf_test;
using minfer::gguf::Error;
using minfer::gguf::File;
using minfer::gguf::ValueType;

// Built with += : GCC 12 warns falsely (-Wrestrict) on "t" + std::to_string(i).
std::string token(int i) {
  std::string s = "t";
  s += std::to_string(i);
  return s;
}

std::vector<uint8_t> make_kvs() {
  Bytes b;
  b.header(3, 0, 13);
  b.str("as_i32").u32(T_INT32).le<int32_t>(4096);
  b.str("as_u64").u32(T_UINT64).u64(128);
  b.str("neg").u32(T_INT32).le<int32_t>(-5);
  b.str("big").u32(T_UINT64).u64(uint64_t{1} << 40);
  b.str("u8").u32(T_UINT8).u8(200);
  b.str("f32").u32(T_FLOAT32).le(1e-6f);
  b.str("f64").u32(T_FLOAT64).le(1e6);
  b.str("f64_huge").u32(T_FLOAT64).le(1e300);
  b.str("flag").u32(T_BOOL).u8(1);
  b.str("name").u32(T_STRING).str("qwen\t3");
  b.str("ids").u32(T_ARRAY).u32(T_INT64).u64(3).le<int64_t>(1).le<int64_t>(-2).le<int64_t>(3);
  b.str("toks").u32(T_ARRAY).u32(T_STRING).u64(10);
  for (int i = 0; i < 10; ++i) b.str(token(i));
  b.str("u16s").u32(T_ARRAY).u32(T_UINT16).u64(2).le<uint16_t>(1).le<uint16_t>(65535);
  return b.b;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GgufValue, IntegerGettersAcceptEveryIntegerTypeThatFits) {
  const auto bytes = make_kvs();
  const File f = File::from_memory(bytes, "kv.gguf");
  EXPECT_EQ(f.get_u32("as_i32"), 4096u);
  EXPECT_EQ(f.get_u64("as_i32"), 4096u);
  EXPECT_EQ(f.get_u32("as_u64"), 128u);
  EXPECT_EQ(f.get_i32("as_u64"), 128);
  EXPECT_EQ(f.get_i32("neg"), -5);
  EXPECT_EQ(f.get_i64("neg"), -5);
  EXPECT_EQ(f.get_u64("big"), uint64_t{1} << 40);
  EXPECT_EQ(f.get_i32("u8"), 200);
  EXPECT_EQ(f.get("u8").as<uint8_t>(), 200);
  EXPECT_EQ(f.get_array<int32_t>("ids"), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f.get_array<uint32_t>("u16s"), (std::vector<uint32_t>{1, 65535}));
}

TEST(GgufValue, MismatchesNameTheKeyAndTheType) {
  const auto bytes = make_kvs();
  const File f = File::from_memory(bytes, "kv.gguf");
  auto expect = [&](const std::function<void()>& fn, std::vector<std::string> subs) {
    const std::string m = error_of(fn);
    ASSERT_FALSE(m.empty());
    EXPECT_NE(m.find("kv.gguf"), std::string::npos) << m;
    for (const auto& s : subs) EXPECT_NE(m.find(s), std::string::npos) << s << " | " << m;
  };
  expect([&] { f.get_u32("neg"); }, {"'neg'", "int32 value -5", "uint32"});
  expect([&] { f.get_u32("big"); }, {"'big'", "uint64 value 1099511627776", "uint32"});
  expect([&] { f.get_u32("name"); }, {"'name'", "type string", "expected uint32"});
  expect([&] { f.get_u32("f32"); }, {"'f32'", "type float32"});
  expect([&] { f.get_bool("as_i32"); }, {"'as_i32'", "type int32", "bool"});
  expect([&] { f.get_string("as_i32"); }, {"'as_i32'", "expected string"});
  expect([&] { f.get_u32("missing.key"); }, {"'missing.key'", "not found"});
  expect([&] { f.get_string_array("ids"); }, {"'ids'", "array of int64"});
  expect([&] { f.get_array<float>("toks"); }, {"'toks'", "string"});
  expect([&] { f.get_array<uint32_t>("ids"); }, {"'ids'", "element 1", "-2"});
  expect([&] { f.get_array<int8_t>("u16s"); }, {"'u16s'", "element 1", "65535"});
  expect([&] { f.get_f32("f64_huge"); }, {"'f64_huge'", "float32"});
  expect([&] { f.get_u32_or("name", 3); }, {"'name'"});  // present with a wrong type: no default
  expect([&] { f.tensor("w"); }, {"'w'", "not found"});
  expect([&] { f.get("u8").array_size(); }, {"'u8'", "expected array"});
}

TEST(GgufValue, FloatsBoolsStrings) {
  const auto bytes = make_kvs();
  const File f = File::from_memory(bytes, "kv.gguf");
  EXPECT_EQ(f.get_f32("f32"), 1e-6f);
  EXPECT_EQ(f.get_f64("f32"), static_cast<double>(1e-6f));
  EXPECT_EQ(f.get_f32("f64"), 1e6f);
  EXPECT_EQ(f.get_f64("f64_huge"), 1e300);
  EXPECT_TRUE(f.get_bool("flag"));
  EXPECT_EQ(f.get_string("name"), "qwen\t3");
  // String views point into the file image: no copies.
  const std::string_view s = f.get_string("name");
  EXPECT_GE(reinterpret_cast<const uint8_t*>(s.data()), bytes.data());
  EXPECT_LT(reinterpret_cast<const uint8_t*>(s.data()), bytes.data() + bytes.size());
  const auto toks = f.get_string_array("toks");
  ASSERT_EQ(toks.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(toks[static_cast<size_t>(i)], token(i));
}

TEST(GgufValue, OptionalAndDefaultVariants) {
  const auto bytes = make_kvs();
  const File f = File::from_memory(bytes, "kv.gguf");
  EXPECT_EQ(f.find("nope"), nullptr);
  ASSERT_NE(f.find("u8"), nullptr);
  EXPECT_EQ(f.find("u8")->type(), ValueType::UINT8);
  EXPECT_TRUE(f.has("flag"));
  EXPECT_EQ(f.get_u32_or("nope", 77), 77u);
  EXPECT_EQ(f.get_u32_or("as_i32", 77), 4096u);
  EXPECT_EQ(f.get_f32_or("nope", 0.5f), 0.5f);
  EXPECT_EQ(f.get_string_or("nope", "dflt"), "dflt");
  EXPECT_EQ(f.get_bool_or("nope", true), true);
  EXPECT_EQ(f.get_optional<uint32_t>("nope"), std::nullopt);
  EXPECT_EQ(f.get_optional<int64_t>("neg"), -5);
}

TEST(GgufValue, IterationInFileOrderAndRendering) {
  const auto bytes = make_kvs();
  const File f = File::from_memory(bytes, "kv.gguf");
  std::vector<std::string> keys;
  for (const auto& v : f.kvs()) keys.emplace_back(v.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"as_i32", "as_u64", "neg", "big", "u8", "f32", "f64",
                                            "f64_huge", "flag", "name", "ids", "toks", "u16s"}));
  EXPECT_EQ(f.get("neg").to_string(), "-5");
  EXPECT_EQ(f.get("flag").to_string(), "true");
  EXPECT_EQ(f.get("name").to_string(), "\"qwen\\t3\"");
  EXPECT_EQ(f.get("ids").to_string(), "[int64 x 3] 1, -2, 3");
  EXPECT_EQ(f.get("toks").to_string(2), "[string x 10] \"t0\", \"t1\", ...");
  EXPECT_EQ(f.get("toks").array_size(), 10u);
  EXPECT_EQ(f.get("toks").array_type(), ValueType::STRING);
}

TEST(GgufValue, MovedFileKeepsViewsValid) {
  const auto bytes = make_kvs();
  File a = File::from_memory(bytes, "kv.gguf");
  const minfer::gguf::Value* v = a.find("name");
  File b = std::move(a);
  EXPECT_EQ(b.find("name"), v);
  EXPECT_EQ(v->as_string(), "qwen\t3");
  const std::string m = error_of([&] { v->as<uint32_t>(); });
  EXPECT_NE(m.find("kv.gguf"), std::string::npos) << m;
}

}  // namespace
