// Writer -> reader round trips (every value type, arrays, tensors of several dtypes, alignments
// 16/32/64) and checks of the writer's bytes against an image assembled by hand from the spec.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <sys/resource.h>

#include <csignal>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace {
// The names in `dir`: what a write left behind.
std::set<std::string> names_in(const std::filesystem::path& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}
}  // namespace

namespace {

using namespace gguf_test;
using minfer::DType;
using minfer::gguf::Error;
using minfer::gguf::File;
using minfer::gguf::ValueType;
using minfer::gguf::Writer;


struct TensorCase {
  std::string name;
  DType type;
  std::vector<int64_t> ne;
  size_t nbytes;  // computed here from the GGUF block sizes, not by the library
  std::vector<uint8_t> data;
};

// Byte sizes from the ggml block definitions: f32 4 B, f16 2 B, q8_0 34 B / 32, q4_0 18 B / 32,
// q4_K 144 B / 256, q6_K 210 B / 256, i32 4 B, bf16 2 B.
std::vector<TensorCase> make_tensors(std::mt19937_64& rng) {
  std::vector<TensorCase> ts = {
      {"token_embd.weight", DType::F16, {64, 10}, 64 * 10 * 2, {}},
      {"blk.0.attn_q.weight", DType::Q8_0, {64, 3}, 2 * 34 * 3, {}},
      {"blk.0.ffn_down.weight", DType::Q4_K, {256, 2}, 144 * 2, {}},
      {"blk.0.ffn_up.weight", DType::Q6_K, {512, 1, 2}, 2 * 210 * 2, {}},
      {"blk.0.attn_k.weight", DType::Q4_0, {32, 5}, 18 * 5, {}},
      {"output_norm.weight", DType::F32, {7}, 28, {}},
      {"pos", DType::I32, {3, 2, 2, 2}, 4 * 24, {}},
      {"bf", DType::BF16, {5, 3}, 30, {}},
      {"empty", DType::F32, {0, 3}, 0, {}},
  };
  for (auto& t : ts) t.data = random_bytes(rng, t.nbytes);
  return ts;
}

void set_every_type(Writer& w) {
  w.set_u8("t.u8", 251);
  w.set_i8("t.i8", -128);
  w.set_u16("t.u16", 65535);
  w.set_i16("t.i16", -32768);
  w.set_u32("t.u32", 4294967295u);
  w.set_i32("t.i32", -2147483647 - 1);
  w.set_f32("t.f32", -0.15625f);
  w.set_bool("t.bool", true);
  w.set_bool("t.bool_false", false);
  w.set_string("t.str", "héllo \"world\"\n");
  w.set_string("t.str_empty", "");
  w.set_u64("t.u64", ~uint64_t{0});
  w.set_i64("t.i64", std::numeric_limits<int64_t>::min());
  w.set_f64("t.f64", 1e300);
  w.set_array("t.a_u8", std::vector<uint8_t>{0, 255, 7});
  w.set_array("t.a_i8", std::vector<int8_t>{-128, 127});
  w.set_array("t.a_u16", std::vector<uint16_t>{1, 65535});
  w.set_array("t.a_i16", std::vector<int16_t>{-32768, 5});
  w.set_array("t.a_u32", std::vector<uint32_t>{4294967295u, 0});
  w.set_array("t.a_i32", std::vector<int32_t>{-1, 2, -3, 4});
  w.set_array("t.a_f32", std::vector<float>{0.5f, -2.25f, 1e-8f});
  w.set_array("t.a_bool", std::vector<bool>{true, false, true});
  w.set_array("t.a_u64", std::vector<uint64_t>{~uint64_t{0}, 1});
  w.set_array("t.a_i64", std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 9});
  w.set_array("t.a_f64", std::vector<double>{3.25, -1e-300});
  w.set_array("t.a_empty", std::vector<int32_t>{});
  w.set_string_array("t.a_str", std::vector<std::string>{"a", "", "Ġthe", std::string(300, 'z')});
}

void check_every_type(const File& f) {
  EXPECT_EQ(f.get(std::string("t.u8")).type(), ValueType::UINT8);
  EXPECT_EQ(f.get_u32("t.u8"), 251u);
  EXPECT_EQ(f.get_i32("t.i8"), -128);
  EXPECT_EQ(f.get_u32("t.u16"), 65535u);
  EXPECT_EQ(f.get_i32("t.i16"), -32768);
  EXPECT_EQ(f.get_u32("t.u32"), 4294967295u);
  EXPECT_EQ(f.get_i32("t.i32"), -2147483647 - 1);
  EXPECT_EQ(f.get_f32("t.f32"), -0.15625f);
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_FALSE(f.get_bool("t.bool_false"));
  EXPECT_EQ(f.get_string("t.str"), "héllo \"world\"\n");
  EXPECT_EQ(f.get_string("t.str_empty"), "");
  EXPECT_EQ(f.get_u64("t.u64"), ~uint64_t{0});
  EXPECT_EQ(f.get_i64("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_f64("t.f64"), 1e300);
  EXPECT_EQ(f.get_array<uint8_t>("t.a_u8"), (std::vector<uint8_t>{0, 255, 7}));
  EXPECT_EQ(f.get_array<int8_t>("t.a_i8"), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(f.get_array<uint16_t>("t.a_u16"), (std::vector<uint16_t>{1, 65535}));
  EXPECT_EQ(f.get_array<int16_t>("t.a_i16"), (std::vector<int16_t>{-32768, 5}));
  EXPECT_EQ(f.get_array<uint32_t>("t.a_u32"), (std::vector<uint32_t>{4294967295u, 0}));
  EXPECT_EQ(f.get_array<int32_t>("t.a_i32"), (std::vector<int32_t>{-1, 2, -3, 4}));
  EXPECT_EQ(f.get_array<float>("t.a_f32"), (std::vector<float>{0.5f, -2.25f, 1e-8f}));
  EXPECT_EQ(f.get_array<bool>("t.a_bool"), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(f.get_array<uint64_t>("t.a_u64"), (std::vector<uint64_t>{~uint64_t{0}, 1}));
  EXPECT_EQ(f.get_array<int64_t>("t.a_i64"),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 9}));
  EXPECT_EQ(f.get_array<double>("t.a_f64"), (std::vector<double>{3.25, -1e-300}));
  EXPECT_TRUE(f.get_array<int32_t>("t.a_empty").empty());
  EXPECT_EQ(f.get("t.a_empty").array_type(), ValueType::INT32);
  const auto strs = f.get_string_array("t.a_str");
  ASSERT_EQ(strs.size(), 4u);
  EXPECT_EQ(strs[0], "a");
  EXPECT_EQ(strs[1], "");
  EXPECT_EQ(strs[2], "Ġthe");
  EXPECT_EQ(strs[3], std::string(300, 'z'));
}

class GgufRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufRoundTrip, EveryValueTypeAndTensorReadsBackIdentical) {
  const uint32_t alignment = GetParam();
  auto rng = make_rng();
  TempDir dir;
  const auto path = dir.path / "rt.gguf";
  const std::vector<TensorCase> ts = make_tensors(rng);
  {
    Writer w;
    set_every_type(w);
    if (alignment != 32) w.set_alignment(alignment);
    for (const auto& t : ts) w.add_tensor(t.name, t.type, t.ne, t.data.data());
    w.write(path);
  }
  EXPECT_EQ(names_in(dir.path), std::set<std::string>{"rt.gguf"}) << "a temporary file was left behind";
  const File f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  check_every_type(f);
  ASSERT_EQ(f.n_tensors(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    SCOPED_TRACE(ts[i].name);
    const auto& t = f.tensors()[i];  // file order = insertion order
    EXPECT_EQ(t.name, ts[i].name);
    EXPECT_EQ(t.type, ts[i].type);
    EXPECT_EQ(t.n_dims, static_cast<int>(ts[i].ne.size()));
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(t.ne[d], d < t.n_dims ? ts[i].ne[static_cast<size_t>(d)] : 1);
    EXPECT_EQ(t.nbytes, ts[i].nbytes);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(&f.tensor(ts[i].name), &t);
    if (t.nbytes) {
      EXPECT_EQ(0, std::memcmp(t.data, ts[i].data.data(), t.nbytes));
    }
    // Padding after each tensor is zero-filled up to the next aligned offset.
    const uint64_t end = f.data_offset() + t.offset + t.nbytes;
    for (uint64_t p = end; p % alignment != 0; ++p) ASSERT_EQ(f.bytes()[p], 0) << p;
  }
  // ggml's writer pads after the last tensor too.
  EXPECT_EQ(f.bytes().size() % alignment, 0u);
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufRoundTrip, ::testing::Values(32u, 16u, 64u));

TEST(GgufWriter, StreamedTensorsAndCopyKvsWithOverride) {
  auto rng = make_rng();
  TempDir dir;
  const std::vector<uint8_t> big = random_bytes(rng, 34 * 8 * 100);
  {
    Writer w;
    set_every_type(w);
    w.set_alignment(64);
    w.add_tensor_streamed("q", DType::Q8_0, {256, 100}, [&](const Writer::Emit& emit) {
      for (size_t off = 0; off < big.size(); off += 1000)
        emit(big.data() + off, std::min<size_t>(1000, big.size() - off));
    });
    w.write(dir.path / "a.gguf");
  }
  const File a(dir.path / "a.gguf");
  Writer w2;
  w2.copy_kvs(a);
  w2.set_u32("t.u32", 17);  // override in place
  w2.set_string("new.key", "v");
  EXPECT_TRUE(w2.remove("t.i8"));
  EXPECT_FALSE(w2.remove("t.i8"));
  const auto& q = a.tensor("q");
  w2.add_tensor("q", q.type, {q.ne[0], q.ne[1]}, q.data);
  w2.write(dir.path / "b.gguf");
  const File b(dir.path / "b.gguf");
  EXPECT_EQ(b.alignment(), 64u);  // general.alignment was copied and honoured
  EXPECT_EQ(b.get_u32("t.u32"), 17u);
  EXPECT_EQ(b.get_string("new.key"), "v");
  EXPECT_FALSE(b.has("t.i8"));
  ASSERT_EQ(b.n_kv(), a.n_kv());
  // Order: the copied keys in file order (minus the removed one), then the new key.
  size_t j = 0;
  for (const auto& v : a.kvs()) {
    if (v.key() == "t.i8") continue;
    EXPECT_EQ(b.kvs()[j].key(), v.key());
    if (v.key() != "t.u32") {
      EXPECT_EQ(b.kvs()[j].type(), v.type());
      ASSERT_EQ(b.kvs()[j].raw().size(), v.raw().size());
      EXPECT_EQ(0, std::memcmp(b.kvs()[j].raw().data(), v.raw().data(), v.raw().size()));
    }
    ++j;
  }
  EXPECT_EQ(b.kvs()[j].key(), "new.key");
  check_every_type(a);
  ASSERT_EQ(b.tensor("q").nbytes, big.size());
  EXPECT_EQ(0, std::memcmp(b.tensor("q").data, big.data(), big.size()));
}

TEST(GgufWriter, StreamedSourceWithWrongByteCountFails) {
  TempDir dir;
  std::vector<uint8_t> buf(200, 1);
  for (size_t emitted : {size_t{127}, size_t{129}}) {
    Writer w;
    w.add_tensor_streamed("w", DType::F32, {32}, [&](const Writer::Emit& emit) {
      emit(buf.data(), emitted);
    });
    try {
      w.write(dir.path / "x.gguf");
      ADD_FAILURE() << "accepted " << emitted << " bytes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(names_in(dir.path).empty()) << "a failed write left a file behind";
  }
}

TEST(GgufWriter, RejectsBadTensorsAndAlignments) {
  Writer w;
  uint8_t buf[64] = {1};
  EXPECT_THROW(w.add_tensor("q", DType::Q8_0, {33}, buf), Error);
  EXPECT_THROW(w.add_tensor("n", DType::F32, {-1}, buf), Error);
  EXPECT_THROW(w.add_tensor("d", DType::F32, {1, 1, 1, 1, 1}, buf), Error);
  EXPECT_THROW(w.add_tensor("e", DType::F32, {}, buf), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'x'), DType::F32, {1}, buf), Error);
  EXPECT_THROW(w.add_tensor("o", DType::F32, {int64_t{1} << 62, 4}, buf), Error);
  w.add_tensor(std::string(63, 'x'), DType::F32, {1}, buf);
  EXPECT_THROW(w.add_tensor(std::string(63, 'x'), DType::F32, {1}, buf), Error);  // duplicate
  for (uint32_t a : {0u, 4u, 12u, 24u, 1u}) EXPECT_THROW(w.set_alignment(a), Error) << a;
  TempDir dir;
  w.set_u64("general.alignment", 32);  // wrong type
  EXPECT_THROW(w.write(dir.path / "x.gguf"), Error);
  w.set_u32("general.alignment", 48);  // not a power of two
  EXPECT_THROW(w.write(dir.path / "x.gguf"), Error);
  w.set_u32("general.alignment", 8);
  w.write(dir.path / "x.gguf");
  EXPECT_EQ(File(dir.path / "x.gguf").alignment(), 8u);
}

TEST(GgufWriter, IoFailureIsAClearError) {
  Writer w;
  w.set_u32("a", 1);
  try {
    w.write("/nonexistent-dir/sub/out.gguf");
    ADD_FAILURE() << "write to a missing directory succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/sub/out.gguf"), std::string::npos)
        << e.what();
  }
  {
    // A file-size limit of 1 MiB makes the writes of a 4 MiB file fail (EFBIG; SIGXFSZ ignored),
    // as a full disk would: a clear error, and nothing left behind.
    Writer big;
    std::vector<uint8_t> data(4 << 20, 7);
    big.add_tensor("w", DType::F32, {1 << 20}, data.data());
    TempDir dir;
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = old;
    small.rlim_cur = 1 << 20;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    std::string what;
    try {
      big.write(dir.path / "full.gguf");
    } catch (const Error& e) {
      what = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_NE(what.find("write failed"), std::string::npos) << "got: '" << what << "'";
    EXPECT_TRUE(names_in(dir.path).empty()) << "a failed write left a file behind";
  }
}

// A file larger than the disk's free space is refused before a byte is written (the source is
// never called).
TEST(GgufWriter, RefusesAFileTheDiskCannotHold) {
  TempDir dir;
  Writer w;
  bool called = false;
  w.add_tensor_streamed("w", DType::F32, {int64_t{1} << 40, 1024}, [&](const Writer::Emit&) { called = true; });
  try {
    w.write(dir.path / "huge.gguf");
    ADD_FAILURE() << "a 4 PiB file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GiB free"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(called);
  EXPECT_TRUE(names_in(dir.path).empty());
}

// The temporary file is a new one with a unique name: a file the write must not touch — here the
// input of a conversion named like a fixed temporary, "out.gguf.tmp" — stays as it was.
TEST(GgufWriter, NeverTruncatesAnExistingFileOnTheWay) {
  TempDir dir;
  const std::string keep = "the input being converted";
  std::ofstream(dir.path / "out.gguf.tmp") << keep;
  Writer w;
  w.set_u32("a", 3);
  w.write(dir.path / "out.gguf");
  std::ifstream in(dir.path / "out.gguf.tmp");
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, keep);
  EXPECT_EQ(names_in(dir.path), (std::set<std::string>{"out.gguf", "out.gguf.tmp"}));
  EXPECT_EQ(File(dir.path / "out.gguf").get_u32("a"), 3u);
  // The finished file has a new file's permissions (mkstemp's are 0600).
  const mode_t mask = umask(0);
  umask(mask);
  struct stat st {};
  ASSERT_EQ(stat((dir.path / "out.gguf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST(GgufWriter, WritesThroughSymlinksAndRefusesOtherFiles) {
  TempDir dir;
  Writer w;
  w.set_u32("a", 7);
  // A symlink (here to a not yet existing file, then to an existing one): the target gets the
  // file, the link stays a link.
  std::filesystem::create_directory(dir.path / "real");
  std::filesystem::create_symlink("real/t.gguf", dir.path / "link.gguf");
  for (int round = 0; round < 2; ++round) {
    w.write(dir.path / "link.gguf");
    EXPECT_TRUE(std::filesystem::is_symlink(dir.path / "link.gguf")) << round;
    EXPECT_TRUE(std::filesystem::is_regular_file(dir.path / "real" / "t.gguf")) << round;
    EXPECT_EQ(File(dir.path / "real" / "t.gguf").get_u32("a"), 7u) << round;
  }
  // A FIFO and a directory are not replaced.
  const auto fifo = dir.path / "pipe.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_directory(dir.path / "d.gguf");
  for (const auto& p : {fifo, dir.path / "d.gguf"}) {
    try {
      w.write(p);
      ADD_FAILURE() << p << ": written";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_TRUE(std::filesystem::is_directory(dir.path / "d.gguf"));
}

// The writer's output for a tiny file, compared with the bytes the spec prescribes.
TEST(GgufWriter, BytesMatchTheSpecLayout) {
  TempDir dir;
  const float w0[3] = {1.0f, -2.0f, 0.5f};
  const uint16_t w1[2] = {0x3c00, 0xc000};  // f16 1.0, -2.0
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("n", 7);
  w.set_string_array("toks", std::vector<std::string>{"ab", "c"});
  w.set_array("sc", std::vector<float>{0.25f});
  w.set_bool("b", true);
  w.add_tensor("w0", DType::F32, {3}, w0);
  w.add_tensor("w1", DType::F16, {2, 1}, w1);
  w.write(dir.path / "s.gguf");

  Bytes e;
  e.header(3, 2, 5);
  e.kv_str("general.architecture", "llama");
  e.kv_u32("n", 7);
  e.str("toks").u32(T_ARRAY).u32(T_STRING).u64(2).str("ab").str("c");
  e.str("sc").u32(T_ARRAY).u32(T_FLOAT32).u64(1).le(0.25f);
  e.str("b").u32(T_BOOL).u8(1);
  e.tensor_info("w0", {3}, G_F32, 0);
  e.tensor_info("w1", {2, 1}, G_F16, 32);
  e.pad_to(32);
  e.raw(w0, 12).pad_to(32);
  e.raw(w1, 4).pad_to(32);
  EXPECT_EQ(read_all(dir.path / "s.gguf"), e.b);
}

TEST(GgufWriter, EmptyWriterWritesAValidHeader) {
  TempDir dir;
  Writer().write(dir.path / "e.gguf");
  Bytes e;
  e.header(3, 0, 0).pad_to(32);
  EXPECT_EQ(read_all(dir.path / "e.gguf"), e.b);
  const File f(dir.path / "e.gguf");
  EXPECT_EQ(f.n_kv() + f.n_tensors(), 0u);
}

}  // namespace
