#include "gguf/writer.h"

#include <fmt/format.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include <sys/stat.h>
#include <unistd.h>

#include "gguf/escape.h"

namespace minfer::gguf {

struct Writer::Impl {
  struct KV {
    std::string key;
    ValueType type;
    std::vector<uint8_t> payload;  // the encoded value, exactly as it follows the type id
  };
  struct Tensor {
    std::string name;
    DType type;
    int n_dims;
    int64_t ne[kMaxDims];
    size_t nbytes;
    const void* data;
    TensorSource source;
  };
  std::vector<KV> kvs;
  std::unordered_map<std::string, size_t> kv_index;
  std::vector<Tensor> tensors;
  std::unordered_set<std::string> tensor_names;
  bool pad_empty = true;  // pad a tensor-less file's end to the alignment (ggml's writer)

  void add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne,
                  const void* data, TensorSource source);
};

namespace {

// resize + memcpy rather than vector::insert: GCC 12 warns falsely (-Wstringop-overflow) on the
// latter for small fixed-size inserts.
void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  put(out, &v, sizeof v);
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put(out, s.data(), s.size());
}
template <class T>
std::vector<uint8_t> scalar(T v) {
  std::vector<uint8_t> out;
  put(out, v);
  return out;
}

bool valid_alignment(uint32_t a) { return a != 0 && a % 8 == 0 && std::has_single_bit(a); }

// Buffered output that throws Error naming the path on any failure, into a new file next to the
// target with a unique name (mkstemp), so that no existing file is ever truncated — not the input
// being converted when it happens to be named like a fixed temporary ("out.gguf.tmp"), not anyone
// else's file. Renamed over the target when complete.
class Output {
 public:
  explicit Output(const std::filesystem::path& target) {
    std::string pattern = target.string() + ".XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    path_ = pattern;
    if (fd < 0) {
      path_ = target.string() + ".XXXXXX";
      fail("cannot create a temporary file next to it");
    }
    created_ = true;
    // mkstemp makes the file 0600; a finished GGUF gets what the user's umask gives a new file.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    f_ = ::fdopen(fd, "wb");
    if (!f_) {
      const int err = errno;
      ::close(fd);
      discard();
      fail("cannot open for writing", err);
    }
    std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  }
  const std::filesystem::path& path() const { return path_; }
  /// Closes and removes the temporary file unless it was renamed away (keep()).
  void discard() {
    if (f_) std::fclose(f_);
    f_ = nullptr;
    if (!created_) return;
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    created_ = false;
  }
  void keep() { created_ = false; }
  ~Output() { discard(); }
  void write(const void* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, f_) != n) fail("write failed");
    pos_ += n;
  }
  template <class T>
  void put(T v) {
    write(&v, sizeof v);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    write(s.data(), s.size());
  }
  void pad(uint64_t alignment) {
    static constexpr uint8_t kZeros[256] = {};
    uint64_t n = (alignment - pos_ % alignment) % alignment;
    while (n != 0) {
      const size_t k = std::min<uint64_t>(n, sizeof kZeros);
      write(kZeros, k);
      n -= k;
    }
  }
  uint64_t pos() const { return pos_; }
  void close() {
    std::FILE* f = f_;
    f_ = nullptr;
    if (std::fflush(f) != 0) {
      const int err = errno;
      std::fclose(f);
      fail("write failed", err);
    }
    if (std::fclose(f) != 0) fail("close failed");
  }
  [[noreturn]] void fail(const char* what, int err = errno) const {
    throw Error(fmt::format("{}: {}: {}", path_.string(), what, std::strerror(err)));
  }

 private:
  std::filesystem::path path_;
  std::FILE* f_ = nullptr;
  bool created_ = false;
  uint64_t pos_ = 0;
};

}  // namespace

Writer::Writer() : impl_(std::make_unique<Impl>()) {}
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;
Writer::~Writer() = default;

void Writer::set_raw(std::string_view key, ValueType type, std::vector<uint8_t> payload) {
  if (key.size() > kMaxKeyLength)
    throw Error(fmt::format("gguf writer: key {} is {} bytes long; the GGUF limit is {}",
                            quote(key), key.size(), kMaxKeyLength));
  const auto it = impl_->kv_index.find(std::string(key));
  if (it != impl_->kv_index.end()) {
    impl_->kvs[it->second].type = type;
    impl_->kvs[it->second].payload = std::move(payload);
    return;
  }
  impl_->kv_index.emplace(std::string(key), impl_->kvs.size());
  impl_->kvs.push_back({std::string(key), type, std::move(payload)});
}

void Writer::set_u8(std::string_view key, uint8_t v) { set_raw(key, ValueType::UINT8, scalar(v)); }
void Writer::set_i8(std::string_view key, int8_t v) { set_raw(key, ValueType::INT8, scalar(v)); }
void Writer::set_u16(std::string_view key, uint16_t v) {
  set_raw(key, ValueType::UINT16, scalar(v));
}
void Writer::set_i16(std::string_view key, int16_t v) { set_raw(key, ValueType::INT16, scalar(v)); }
void Writer::set_u32(std::string_view key, uint32_t v) {
  set_raw(key, ValueType::UINT32, scalar(v));
}
void Writer::set_i32(std::string_view key, int32_t v) { set_raw(key, ValueType::INT32, scalar(v)); }
void Writer::set_u64(std::string_view key, uint64_t v) {
  set_raw(key, ValueType::UINT64, scalar(v));
}
void Writer::set_i64(std::string_view key, int64_t v) { set_raw(key, ValueType::INT64, scalar(v)); }
void Writer::set_f32(std::string_view key, float v) { set_raw(key, ValueType::FLOAT32, scalar(v)); }
void Writer::set_f64(std::string_view key, double v) {
  set_raw(key, ValueType::FLOAT64, scalar(v));
}
void Writer::set_bool(std::string_view key, bool v) {
  set_raw(key, ValueType::BOOL, scalar<uint8_t>(v ? 1 : 0));
}
void Writer::set_string(std::string_view key, std::string_view v) {
  std::vector<uint8_t> p;
  put_string(p, v);
  set_raw(key, ValueType::STRING, std::move(p));
}

namespace {
template <class S>
std::vector<uint8_t> string_array(std::span<const S> v) {
  size_t total = 12;
  for (const auto& s : v) total += 8 + s.size();
  std::vector<uint8_t> p;
  p.reserve(total);
  put<uint32_t>(p, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(p, v.size());
  for (const auto& s : v) put_string(p, s);
  return p;
}
}  // namespace

void Writer::set_string_array(std::string_view key, std::span<const std::string_view> v) {
  set_raw(key, ValueType::ARRAY, string_array(v));
}
void Writer::set_string_array(std::string_view key, std::span<const std::string> v) {
  set_raw(key, ValueType::ARRAY, string_array(v));
}

void Writer::set_bool_array(std::string_view key, std::span<const uint8_t> v) {
  std::vector<uint8_t> p;
  put<uint32_t>(p, static_cast<uint32_t>(ValueType::BOOL));
  put<uint64_t>(p, v.size());
  for (uint8_t b : v) put<uint8_t>(p, b ? 1 : 0);
  set_raw(key, ValueType::ARRAY, std::move(p));
}

void Writer::set(std::string_view key, const Value& v) {
  std::vector<uint8_t> p;
  const std::span<const uint8_t> raw = v.raw();
  if (v.type() == ValueType::ARRAY) {
    p.reserve(12 + raw.size());
    put<uint32_t>(p, static_cast<uint32_t>(v.array_type()));
    put<uint64_t>(p, v.array_size());
  } else if (v.type() == ValueType::STRING) {
    p.reserve(8 + raw.size());
    put<uint64_t>(p, raw.size());
  }
  put(p, raw.data(), raw.size());
  set_raw(key, v.type(), std::move(p));
}

void Writer::copy_kvs(const File& f) {
  for (const Value& v : f.kvs()) set(v.key(), v);
}

bool Writer::remove(std::string_view key) {
  const auto it = impl_->kv_index.find(std::string(key));
  if (it == impl_->kv_index.end()) return false;
  impl_->kvs.erase(impl_->kvs.begin() + static_cast<std::ptrdiff_t>(it->second));
  impl_->kv_index.clear();
  for (size_t i = 0; i < impl_->kvs.size(); ++i) impl_->kv_index.emplace(impl_->kvs[i].key, i);
  return true;
}

bool Writer::has(std::string_view key) const {
  return impl_->kv_index.count(std::string(key)) != 0;
}
size_t Writer::n_kv() const { return impl_->kvs.size(); }
size_t Writer::n_tensors() const { return impl_->tensors.size(); }

void Writer::set_pad_empty_data(bool pad) { impl_->pad_empty = pad; }

void Writer::copy_layout(const File& src) {
  // A tensor-less source is padded when its size reaches the aligned data offset.
  if (src.n_tensors() == 0) set_pad_empty_data(src.bytes().size() >= src.data_offset());
}

void Writer::set_alignment(uint32_t alignment) {
  if (!valid_alignment(alignment))
    throw Error(fmt::format("gguf writer: alignment {} is not a power of two >= 8", alignment));
  set_u32(kAlignmentKey, alignment);
}

void Writer::Impl::add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne,
                              const void* data, TensorSource source) {
  const std::string q = quote(name);
  auto fail = [&](const std::string& msg) {
    throw Error(fmt::format("gguf writer: tensor {}: {}", q, msg));
  };
  if (name.size() >= kMaxTensorName)
    fail(fmt::format("name is {} bytes long; ggml accepts at most {}", name.size(),
                     kMaxTensorName - 1));
  if (tensor_names.count(std::string(name))) fail("duplicate tensor name");
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims))
    fail(fmt::format("{} dims (must be 1..{})", ne.size(), kMaxDims));
  if (!dtype_from_id(static_cast<int64_t>(type)))
    fail(fmt::format("unknown dtype id {}", static_cast<int>(type)));
  Tensor t{std::string(name), type, static_cast<int>(ne.size()), {1, 1, 1, 1}, 0, data,
           std::move(source)};
  int64_t n = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) fail(fmt::format("ne[{}] = {} is negative", d, ne[d]));
    t.ne[d] = ne[d];
    if (__builtin_mul_overflow(n, ne[d], &n)) fail("element count overflows int64");
  }
  try {
    if (t.ne[0] % dtype_block_size(type) != 0)
      fail(fmt::format("ne[0] = {} is not a multiple of the {} block size {}", t.ne[0],
                       dtype_name(type), dtype_block_size(type)));
    t.nbytes = dtype_nbytes(type, n);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  } catch (const std::overflow_error& e) {
    fail(e.what());
  }
  if (!t.data && !t.source && t.nbytes != 0) fail("no data");
  tensor_names.insert(t.name);
  tensors.push_back(std::move(t));
}

void Writer::add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne,
                        const void* data) {
  impl_->add_tensor(name, type, ne, data, nullptr);
}

void Writer::add_tensor_streamed(std::string_view name, DType type,
                                 const std::vector<int64_t>& ne, TensorSource source) {
  if (!source) throw Error(fmt::format("gguf writer: tensor {}: empty source", quote(name)));
  impl_->add_tensor(name, type, ne, nullptr, std::move(source));
}

void Writer::write(const std::filesystem::path& path) const {
  uint32_t alignment = kDefaultAlignment;
  if (const auto it = impl_->kv_index.find(std::string(kAlignmentKey));
      it != impl_->kv_index.end()) {
    const Impl::KV& kv = impl_->kvs[it->second];
    if (kv.type != ValueType::UINT32)
      throw Error(fmt::format("{}: key {} has type {}, expected uint32", path.string(),
                              quote(kAlignmentKey), value_type_name(kv.type)));
    std::memcpy(&alignment, kv.payload.data(), 4);
    if (!valid_alignment(alignment))
      throw Error(fmt::format("{}: alignment {} is not a power of two >= 8", path.string(),
                              alignment));
  }

  // Offsets relative to the data section; each tensor starts aligned.
  std::vector<uint64_t> offsets;
  offsets.reserve(impl_->tensors.size());
  uint64_t off = 0;
  for (const Impl::Tensor& t : impl_->tensors) {
    offsets.push_back(off);
    off += (t.nbytes + alignment - 1) / alignment * alignment;
  }

  // The file written: `path`, or what a symlink there points to (written through, as a shell's
  // `>` would, the link kept); an existing path that is not a regular file is refused (renaming
  // the finished file over it replaced /dev/full itself when run as root).
  std::filesystem::path target = path;
  for (int hops = 0;; ++hops) {
    std::error_code ec;
    if (!std::filesystem::is_symlink(target, ec)) break;
    if (hops == 40) throw Error(fmt::format("{}: too many levels of symbolic links", path.string()));
    const std::filesystem::path link = std::filesystem::read_symlink(target, ec);
    if (ec) throw Error(fmt::format("{}: cannot read the symbolic link: {}", path.string(), ec.message()));
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  {
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(target, ec);
    if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
      throw Error(fmt::format("{}: not a regular file (a GGUF is written to a new or a regular file)",
                              path.string()));
  }
  {
    // A file the disk cannot hold is refused before anything is written (minfer-mkmodel asked for
    // a petabyte-sized shape wrote until killed).
    std::error_code ec;
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    const std::filesystem::space_info sp = std::filesystem::space(dir, ec);
    if (!ec && off > sp.available)
      throw Error(fmt::format("{}: the file needs {:.1f} GiB of tensor data, the disk there has {:.1f} GiB free",
                              path.string(), static_cast<double>(off) / (1 << 30),
                              static_cast<double>(sp.available) / (1 << 30)));
  }
  Output out(target);  // removed by its destructor unless renamed over the target
  out.put<uint32_t>(kMagic);
  out.put<uint32_t>(kVersion);
  out.put<uint64_t>(impl_->tensors.size());
  out.put<uint64_t>(impl_->kvs.size());
  for (const Impl::KV& kv : impl_->kvs) {
    out.put_string(kv.key);
    out.put<uint32_t>(static_cast<uint32_t>(kv.type));
    out.write(kv.payload.data(), kv.payload.size());
  }
  for (size_t i = 0; i < impl_->tensors.size(); ++i) {
    const Impl::Tensor& t = impl_->tensors[i];
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.n_dims));
    for (int d = 0; d < t.n_dims; ++d) out.put<uint64_t>(static_cast<uint64_t>(t.ne[d]));
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offsets[i]);
  }
  // The data section starts aligned. Without tensors there is no data section: ggml's writer
  // pads anyway, gguf-py's vocab-only path (convert_hf_to_gguf.py --vocab-only) ends right
  // after the metadata; set_pad_empty_data() picks one, so either kind is rewritten exactly.
  if (!impl_->tensors.empty() || impl_->pad_empty) out.pad(alignment);
  for (const Impl::Tensor& t : impl_->tensors) {
    if (t.source) {
      size_t written = 0;
      const Emit emit = [&](const void* p, size_t n) {
        if (n > t.nbytes - written)
          throw Error(fmt::format("{}: tensor {}: source emitted more than its {} bytes",
                                  path.string(), quote(t.name), t.nbytes));
        out.write(p, n);
        written += n;
      };
      t.source(emit);
      if (written != t.nbytes)
        throw Error(fmt::format("{}: tensor {}: source emitted {} bytes, expected {}",
                                path.string(), quote(t.name), written, t.nbytes));
    } else {
      out.write(t.data, t.nbytes);
    }
    out.pad(alignment);
  }
  out.close();
  std::error_code ec;
  std::filesystem::rename(out.path(), target, ec);
  if (ec)
    throw Error(fmt::format("{}: cannot rename {} to {}: {}", path.string(), out.path().string(),
                            target.string(), ec.message()));
  out.keep();
}

}  // namespace minfer::gguf
