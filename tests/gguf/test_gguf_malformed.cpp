// A deterministic corpus of malformed GGUF images, assembled byte by byte from the spec: each
// must be rejected with gguf::Error whose message names the file and the offending field, key or
// tensor — and never crash or read out of bounds (this suite also runs under ASan).
#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace {

using namespace gguf_test;
using minfer::gguf::Error;
using minfer::gguf::File;

constexpr const char* kName = "mem.gguf";

std::string open_error(const std::vector<uint8_t>& b) {
  try {
    File f = File::from_memory(b, kName);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects rejection with a message that names the file and contains every substring.
void expect_rejected(const std::vector<uint8_t>& b, std::initializer_list<std::string_view> subs) {
  const std::string msg = open_error(b);
  ASSERT_FALSE(msg.empty()) << "malformed file was accepted";
  EXPECT_NE(msg.find(kName), std::string::npos) << msg;
  for (std::string_view s : subs) EXPECT_NE(msg.find(s), std::string::npos) << "missing '" << s << "' in: " << msg;
}
void expect_rejected(const Bytes& b, std::initializer_list<std::string_view> subs) {
  expect_rejected(b.b, subs);
}

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  uint64_t offset;
};

// Header + optional general.alignment + tensor infos + padding + `data_bytes` non-zero bytes.
Bytes file_with_tensors(const std::vector<TensorSpec>& ts, size_t data_bytes,
                        uint32_t alignment_kv = 0) {
  Bytes b;
  b.header(3, ts.size(), alignment_kv ? 1 : 0);
  if (alignment_kv) b.kv_u32("general.alignment", alignment_kv);
  for (const auto& t : ts) b.tensor_info(t.name, t.ne, t.type, t.offset);
  b.pad_to(alignment_kv ? alignment_kv : 32);
  for (size_t i = 0; i < data_bytes; ++i) b.b.push_back(static_cast<uint8_t>(0x5a + i));
  return b;
}

// A small valid v3 file: 4 KVs (string, u32, string array, f32 array) and two tensors whose data
// ends exactly at the end of the file (the last one is 128 bytes, a multiple of 32).
struct Valid {
  Bytes bytes;
  std::vector<uint8_t> data;  // the data section
};
Valid make_valid(std::mt19937_64& rng) {
  Valid v;
  Bytes& b = v.bytes;
  b.header(3, 2, 4);
  b.kv_str("general.architecture", "test");
  b.kv_u32("test.block_count", 7);
  b.str("tokenizer.ggml.tokens").u32(T_ARRAY).u32(T_STRING).u64(3).str("a").str("bc").str("");
  b.str("tokenizer.ggml.scores").u32(T_ARRAY).u32(T_FLOAT32).u64(2).le(0.5f).le(-1.0f);
  b.tensor_info("tok_embd.weight", {8, 4}, G_F16, 0);
  b.tensor_info("blk.0.ffn.weight", {8, 4}, G_F32, 64);
  b.pad_to(32);
  v.data = random_bytes(rng, 64 + 128);
  b.raw(v.data.data(), 64);
  b.raw(v.data.data() + 64, 128);
  return v;
}

TEST(GgufMalformed, ValidBaseFileOpens) {
  auto rng = make_rng();
  const Valid v = make_valid(rng);
  const File f = File::from_memory(v.bytes.b, kName);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.n_kv(), 4u);
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  EXPECT_EQ(f.get_u32("test.block_count"), 7u);
  ASSERT_EQ(f.n_tensors(), 2u);
  const auto& t = f.tensor("blk.0.ffn.weight");
  EXPECT_EQ(t.nbytes, 128u);
  EXPECT_EQ(0, std::memcmp(t.data, v.data.data() + 64, 128));
  EXPECT_EQ(f.tensor("tok_embd.weight").data, f.bytes().data() + f.data_offset());
}

TEST(GgufMalformed, TruncatedAtEveryFieldBoundaryAndEveryEarlyByte) {
  auto rng = make_rng();
  const Valid v = make_valid(rng);
  std::set<size_t> cuts(v.bytes.marks.begin(), v.bytes.marks.end());
  for (size_t i = 0; i < 200; ++i) cuts.insert(i);
  cuts.erase(v.bytes.size());
  size_t n = 0;
  for (size_t cut : cuts) {
    if (cut >= v.bytes.size()) continue;
    SCOPED_TRACE("cut at " + std::to_string(cut));
    // A heap copy of exactly `cut` bytes, so ASan sees any read past the end.
    const std::vector<uint8_t> part(v.bytes.b.begin(), v.bytes.b.begin() + static_cast<long>(cut));
    expect_rejected(part, {});
    ++n;
  }
  EXPECT_GT(n, 200u);
}

TEST(GgufMalformed, TruncatedByOneByteNamesTheCutTensor) {
  auto rng = make_rng();
  const Valid v = make_valid(rng);
  std::vector<uint8_t> part = v.bytes.b;
  part.pop_back();
  expect_rejected(part, {"blk.0.ffn.weight", "runs past the end", "128 bytes"});
}

TEST(GgufMalformed, TruncatedInsideDataPadding) {
  Bytes b = file_with_tensors({{"w", {8}, G_F32, 0}}, 32);
  // Cut the file inside the padding between the tensor infos and the data section.
  const size_t infos_end = b.marks[b.marks.size() - 2];
  std::vector<uint8_t> part(b.b.begin(), b.b.begin() + static_cast<long>(infos_end + 1));
  ASSERT_NE((infos_end + 1) % 32, 0u);
  expect_rejected(part, {"data section", "past the end"});
}

TEST(GgufMalformed, BadMagic) {
  Bytes b;
  b.raw("GGUX", 4).u32(3).u64(0).u64(0);
  expect_rejected(b, {"bad magic", "GGUX"});
  expect_rejected(std::vector<uint8_t>{'G', 'G'}, {"too small"});
  expect_rejected(std::vector<uint8_t>{}, {"too small"});
}

TEST(GgufMalformed, BadVersion) {
  for (uint32_t version : {0u, 1u, 4u, 0xffffffffu}) {
    Bytes b;
    b.header(version, 0, 0);
    expect_rejected(b, {"version"});
  }
  Bytes v1;
  v1.header(1, 0, 0);
  expect_rejected(v1, {"version 1 is not supported"});
  Bytes big;
  big.header(0x03000000u, 0, 0);
  expect_rejected(big, {"big-endian"});
}

TEST(GgufMalformed, Version2IsAccepted) {
  Bytes b;
  b.header(2, 0, 1).kv_u32("a", 5);
  const File f = File::from_memory(b.b, kName);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_u32("a"), 5u);
}

TEST(GgufMalformed, HugeCountsRejectedBeforeAllocating) {
  for (uint64_t n : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1} << 32}) {
    Bytes kv;
    kv.header(3, 0, n).kv_u32("a", 1);
    expect_rejected(kv, {"n_kv", std::to_string(n)});
    Bytes t;
    t.header(3, n, 0).tensor_info("w", {8}, G_F32, 0);
    expect_rejected(t, {"n_tensors", std::to_string(n)});
  }
  // One KV more than the remaining bytes could hold at the minimum KV size (13 bytes).
  Bytes tight;
  tight.header(3, 0, 2).str("").u32(T_UINT8).u8(1);  // 13 bytes: room for exactly one KV
  expect_rejected(tight, {"n_kv = 2"});
}

TEST(GgufMalformed, StringLengthPastEnd) {
  Bytes key;
  key.header(3, 0, 1).u64(uint64_t{1} << 63).raw("abc", 3).u32(T_UINT8).u8(0);
  expect_rejected(key, {"KV #0", "key", "runs past the end"});
  Bytes val;
  val.header(3, 0, 1).str("general.name").u32(T_STRING).u64(100).raw("short", 5);
  expect_rejected(val, {"general.name", "string value", "length 100"});
  Bytes exact;  // length = bytes left + 1
  exact.header(3, 0, 1).str("k").u32(T_STRING).u64(6).raw("12345", 5);
  expect_rejected(exact, {"'k'", "length 6"});
  Bytes name;
  name.header(3, 1, 0).u64(~uint64_t{0}).u32(1).u64(8).u32(G_F32).u64(0);
  expect_rejected(name, {"tensor info #0", "tensor name"});
}

TEST(GgufMalformed, ArrayCountPastEnd) {
  Bytes u32s;
  u32s.header(3, 0, 1).str("arr").u32(T_ARRAY).u32(T_UINT32).u64(uint64_t{1} << 61).u32(1);
  expect_rejected(u32s, {"'arr'", "array of 2305843009213693952 uint32"});
  Bytes u64max;
  u64max.header(3, 0, 1).str("arr").u32(T_ARRAY).u32(T_UINT64).u64(~uint64_t{0}).u64(1);
  expect_rejected(u64max, {"'arr'", "runs past the end"});
  Bytes strs;
  strs.header(3, 0, 1).str("toks").u32(T_ARRAY).u32(T_STRING).u64(uint64_t{1} << 62).str("a");
  expect_rejected(strs, {"'toks'", "string array length"});
  Bytes elem;
  elem.header(3, 0, 1).str("toks").u32(T_ARRAY).u32(T_STRING).u64(3).str("a").str("b");
  elem.u64(1000).raw("xy", 2);
  expect_rejected(elem, {"'toks'", "element 2", "length 1000"});
}

TEST(GgufMalformed, UnknownValueTypes) {
  Bytes t;
  t.header(3, 0, 1).str("k").u32(13).u32(0);
  expect_rejected(t, {"'k'", "unknown value type id 13"});
  Bytes big;
  big.header(3, 0, 1).str("k").u32(0x80000000u).u32(0);
  expect_rejected(big, {"'k'", "unknown value type id 2147483648"});
  Bytes et;
  et.header(3, 0, 1).str("k").u32(T_ARRAY).u32(99).u64(0);
  expect_rejected(et, {"'k'", "element type id 99"});
  Bytes nested;
  nested.header(3, 0, 1).str("k").u32(T_ARRAY).u32(T_ARRAY).u64(1).u32(T_UINT8).u64(1).u8(1);
  expect_rejected(nested, {"'k'", "nested arrays"});
}

TEST(GgufMalformed, BoolMustBeZeroOrOne) {
  Bytes b;
  b.header(3, 0, 1).str("flag").u32(T_BOOL).u8(2);
  expect_rejected(b, {"'flag'", "bool value 2"});
  Bytes arr;
  arr.header(3, 0, 1).str("flags").u32(T_ARRAY).u32(T_BOOL).u64(3).u8(1).u8(0).u8(255);
  expect_rejected(arr, {"'flags'", "element 2", "255"});
}

TEST(GgufMalformed, DuplicateKey) {
  Bytes b;
  b.header(3, 0, 3).kv_u32("a.b", 1).kv_str("c", "x").kv_u32("a.b", 2);
  expect_rejected(b, {"'a.b'", "duplicate key", "KV #0", "KV #2"});
}

TEST(GgufMalformed, KeyLongerThanTheSpecLimit) {
  Bytes b;
  b.header(3, 0, 1).kv_u32(std::string(65536, 'k'), 1);
  expect_rejected(b, {"KV #0", "65536"});
  Bytes ok;
  ok.header(3, 0, 1).kv_u32(std::string(65535, 'k'), 1);
  EXPECT_EQ(File::from_memory(ok.b, kName).get_u32(std::string(65535, 'k')), 1u);
}

TEST(GgufMalformed, BadAlignment) {
  for (uint32_t a : {0u, 12u, 4u, 1u, 0xfffffff9u}) {
    Bytes b;
    b.header(3, 0, 1).kv_u32("general.alignment", a);
    expect_rejected(b, {"general.alignment", "alignment " + std::to_string(a)});
  }
  Bytes u64;
  u64.header(3, 0, 1).str("general.alignment").u32(T_UINT64).u64(32);
  expect_rejected(u64, {"general.alignment", "type uint64, expected uint32"});
  Bytes i32;
  i32.header(3, 0, 1).str("general.alignment").u32(T_INT32).u32(32);
  expect_rejected(i32, {"general.alignment", "type int32"});
  Bytes ok;  // 24 is a multiple of 8 (the spec's rule), though not a power of two
  ok.header(3, 0, 1).kv_u32("general.alignment", 24);
  EXPECT_EQ(File::from_memory(ok.b, kName).alignment(), 24u);
}

TEST(GgufMalformed, NDimsOutOfRange) {
  for (uint32_t nd : {0u, 5u, 0xffffffffu}) {
    Bytes b;
    b.header(3, 1, 0).str("blk.0.w").u32(nd).u64(8).u64(1).u64(1).u64(1).u64(1).u32(G_F32).u64(0);
    b.pad_to(32);
    expect_rejected(b, {"'blk.0.w'", "n_dims = " + std::to_string(nd)});
  }
}

TEST(GgufMalformed, NegativeNe) {
  expect_rejected(file_with_tensors({{"w", {8, uint64_t{1} << 63}, G_F32, 0}}, 32),
                  {"'w'", "ne[1] = 9223372036854775808", "negative"});
  expect_rejected(file_with_tensors({{"w", {~uint64_t{0}}, G_F32, 0}}, 32), {"'w'", "ne[0]"});
}

TEST(GgufMalformed, ZeroNeIsAcceptedWithZeroBytes) {
  const Bytes b = file_with_tensors({{"empty", {0, 4}, G_F32, 0}, {"w", {8}, G_F32, 0}}, 32);
  const File f = File::from_memory(b.b, kName);
  EXPECT_EQ(f.tensor("empty").nbytes, 0u);
  EXPECT_EQ(f.tensor("empty").nelements(), 0);
  EXPECT_EQ(f.tensor("w").nbytes, 32u);
  // Zero dims do not hide an overflow of the others.
  expect_rejected(file_with_tensors({{"z", {0, uint64_t{1} << 62, 4}, G_F32, 0}}, 0),
                  {"'z'", "more elements than fit in int64"});
}

TEST(GgufMalformed, ElementAndByteCountOverflow) {
  expect_rejected(file_with_tensors({{"w", {uint64_t{1} << 32, uint64_t{1} << 32}, G_F32, 0}}, 32),
                  {"'w'", "more elements than fit in int64"});
  expect_rejected(file_with_tensors({{"w", {uint64_t{1} << 62, 2}, G_F32, 0}}, 32),
                  {"'w'", "more elements"});
  expect_rejected(file_with_tensors({{"w", {uint64_t{1} << 62}, G_F32, 0}}, 32),
                  {"'w'", "byte size", "overflows"});
  expect_rejected(file_with_tensors({{"i", {uint64_t{1} << 61}, 27 /* I64 */, 0}}, 32),
                  {"'i'", "i64", "overflows"});
  // The task's example: Q8_0 [2^42 + 1, 1152] (ne[0] is not a whole number of blocks) and its
  // transpose [1152, 2^42 + 1] (5.4e15 bytes, far past the end of the file).
  expect_rejected(file_with_tensors({{"q", {(uint64_t{1} << 42) + 1, 1152}, G_Q8_0, 0}}, 32),
                  {"'q'", "block size 32"});
  expect_rejected(file_with_tensors({{"q", {1152, (uint64_t{1} << 42) + 1}, G_Q8_0, 0}}, 32),
                  {"'q'", "runs past the end"});
}

TEST(GgufMalformed, NeZeroNotMultipleOfBlockSize) {
  expect_rejected(file_with_tensors({{"k", {100}, G_Q4_K, 0}}, 256),
                  {"'k'", "ne[0] = 100", "q4_K block size 256"});
  expect_rejected(file_with_tensors({{"q", {48, 2}, G_Q4_0, 0}}, 256), {"'q'", "q4_0"});
}

TEST(GgufMalformed, UnknownAndRetiredTypeIds) {
  for (uint32_t id : {9999u, 4u, 5u, 16u, 29u, 39u, 0xffffffffu}) {
    expect_rejected(file_with_tensors({{"blk.3.attn_q.weight", {32}, id, 0}}, 256),
                    {"'blk.3.attn_q.weight'", "type id " + std::to_string(id)});
  }
}

TEST(GgufMalformed, DuplicateTensorName) {
  expect_rejected(file_with_tensors({{"w", {8}, G_F32, 0}, {"w", {8}, G_F32, 32}}, 64),
                  {"'w'", "duplicate tensor name"});
}

TEST(GgufMalformed, TensorNameLongerThan64Bytes) {
  expect_rejected(file_with_tensors({{std::string(65, 'n'), {8}, G_F32, 0}}, 32), {"65 bytes"});
  const std::string name64(64, 'n');
  const Bytes ok = file_with_tensors({{name64, {8}, G_F32, 0}}, 32);
  EXPECT_NE(File::from_memory(ok.b, kName).find_tensor(name64), nullptr);
}

TEST(GgufMalformed, OffsetNotAligned) {
  expect_rejected(file_with_tensors({{"w", {8}, G_F32, 8}}, 64),
                  {"'w'", "offset 8", "alignment 32"});
  expect_rejected(file_with_tensors({{"w", {8}, G_F32, 48}}, 128, 32), {"'w'", "offset 48"});
}

TEST(GgufMalformed, OffsetOrDataOutsideTheFile) {
  expect_rejected(file_with_tensors({{"far", {8}, G_F32, uint64_t{1} << 40}}, 64),
                  {"'far'", "offset 1099511627776", "past the end"});
  // Offsets near 2^64 must not wrap the bounds check.
  const uint64_t top = ~uint64_t{0} - 31;  // a multiple of 32
  expect_rejected(file_with_tensors({{"wrap", {8}, G_F32, top}}, 64), {"'wrap'", "past the end"});
  // A tensor that starts inside the file and ends past it.
  expect_rejected(file_with_tensors({{"a", {8}, G_F32, 0}, {"b", {16}, G_F32, 32}}, 64),
                  {"'b'", "64 bytes", "runs past the end"});
  // Huge but representable size: 2^60 bytes.
  expect_rejected(file_with_tensors({{"h", {uint64_t{1} << 58}, G_F32, 0}}, 64),
                  {"'h'", "runs past the end"});
}

// Two tensors sharing bytes would each read the other's data (found by a mutation hunt: a model
// ran on them with no error). Adjacent, empty and out-of-order tensors are fine.
TEST(GgufMalformed, OverlappingTensorData) {
  expect_rejected(file_with_tensors({{"a", {8}, G_F32, 0}, {"b", {8}, G_F32, 0}}, 64),
                  {"'b'", "overlaps tensor 'a' (32 bytes at offset 0)"});
  expect_rejected(file_with_tensors({{"big", {16}, G_F32, 0}, {"in", {8}, G_F32, 32}}, 96),
                  {"'in'", "data at offset 32 overlaps tensor 'big' (64 bytes at offset 0)"});
  const Bytes ok = file_with_tensors(
      {{"second", {8}, G_F32, 32}, {"first", {8}, G_F32, 0}, {"empty", {0}, G_F32, 0}}, 64);
  const File f = File::from_memory(ok.b, kName);
  EXPECT_EQ(f.n_tensors(), 3u);
}

TEST(GgufMalformed, NoTensorsNeedNoDataSection) {
  Bytes b;
  b.header(3, 0, 1).kv_str("general.name", "x");  // ends at 16 mod 32, no padding
  const File f = File::from_memory(b.b, kName);
  EXPECT_EQ(f.n_tensors(), 0u);
  EXPECT_EQ(f.get_string("general.name"), "x");
}

// general.alignment = 16 with the tensor infos ending at 16 (mod 32): the data section starts
// right there (not at the next multiple of 32) and each tensor reads its own bytes.
TEST(GgufMalformed, Alignment16DataStartsAt16Mod32) {
  auto rng = make_rng();
  for (size_t pad = 0; pad < 32; ++pad) {
    Bytes b;
    b.header(3, 2, 2).kv_u32("general.alignment", 16).kv_str("pad", std::string(pad, 'p'));
    b.tensor_info("t0", {4}, G_F32, 0).tensor_info("t1", {3, 2}, G_F16, 16);
    if (b.size() % 32 != 16) continue;
    const size_t base = b.size();
    const std::vector<uint8_t> data = random_bytes(rng, 32);
    b.raw(data.data(), data.size());
    const File f = File::from_memory(b.b, kName);
    EXPECT_EQ(f.alignment(), 16u);
    EXPECT_EQ(f.data_offset(), base);
    EXPECT_EQ(f.data_offset() % 32, 16u);
    EXPECT_EQ(0, std::memcmp(f.tensor("t0").data, data.data(), 16));
    EXPECT_EQ(0, std::memcmp(f.tensor("t1").data, data.data() + 16, 12));
    return;
  }
  FAIL() << "no padding length put the infos end at 16 mod 32";
}

TEST(GgufMalformed, BadPaths) {
  const auto msg = [](const std::filesystem::path& p) {
    try {
      File f(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string missing = msg("/nonexistent/dir/x.gguf");
  EXPECT_NE(missing.find("/nonexistent/dir/x.gguf"), std::string::npos) << missing;
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
  TempDir dir;
  EXPECT_NE(msg(dir.path).find("not a regular file"), std::string::npos);
  const auto empty = dir.path / "empty.gguf";
  { std::ofstream(empty.string()).flush(); }
  EXPECT_NE(msg(empty).find("too small"), std::string::npos);
}

}  // namespace
