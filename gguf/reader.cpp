// GGUF parsing and validation. Every byte is read through Cursor, which checks the remaining
// length first, and every size computation is done in a form that cannot wrap.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <unordered_map>
#include <utility>

#include "gguf/escape.h"
#include "gguf/mapped_file.h"
#include "gguf/reader.h"

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace minfer::gguf {

namespace detail {
struct ValueAccess {
  static Value make(std::string_view key, ValueType type, ValueType elem_type, uint64_t count,
                    const uint8_t* data, size_t nbytes, const std::string* file) {
    Value v;
    v.key_ = key;
    v.type_ = type;
    v.elem_type_ = elem_type;
    v.count_ = count;
    v.data_ = data;
    v.nbytes_ = nbytes;
    v.file_ = file;
    return v;
  }
};
}  // namespace detail

namespace {

// Smallest possible encodings, used to bound counts by the bytes left before allocating:
// a KV with an empty key and a 1-byte value; a tensor info with an empty name and one dim.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// Bounds-checked little-endian reader over the file bytes. Errors are prefixed with the file
// name and the current subject ("header", "key 'x'", "tensor 'y'").
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& file)
      : data_(data), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }
  void set_subject(std::string s) { subject_ = std::move(s); }

  template <class... A>
  [[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) const {
    throw Error(fmt::format("{}: {}: {}", file_, subject_, fmt::format(f, std::forward<A>(a)...)));
  }

  const uint8_t* take(uint64_t n, std::string_view field) {
    if (n > remaining())
      fail("file truncated: {} at offset {} needs {} bytes but only {} remain (file size {})",
           field, pos_, n, remaining(), size_);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint32_t u32(std::string_view field) { return detail::load<uint32_t>(take(4, field)); }
  uint64_t u64(std::string_view field) { return detail::load<uint64_t>(take(8, field)); }

  std::string_view string(std::string_view field) {
    const size_t at = pos_;
    const uint64_t len = u64(field);
    if (len > remaining())
      fail("{} at offset {} has length {}, which runs past the end of the file ({} bytes left, "
           "file size {})",
           field, at, len, remaining(), size_);
    return {reinterpret_cast<const char*>(take(len, field)), static_cast<size_t>(len)};
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
  std::string subject_ = "header";
};

void check_bool(Cursor& c, uint8_t b, uint64_t index) {
  if (b > 1) {
    if (index == std::numeric_limits<uint64_t>::max())
      c.fail("bool value {} is neither 0 nor 1", b);
    c.fail("element {} of the bool array is {}, neither 0 nor 1", index, b);
  }
}

Value read_value(Cursor& c, ValueType type, std::string_view key, const std::string* file) {
  using detail::ValueAccess;
  if (type == ValueType::STRING) {
    const std::string_view s = c.string("string value");
    return ValueAccess::make(key, type, type, 0, reinterpret_cast<const uint8_t*>(s.data()),
                             s.size(), file);
  }
  if (type != ValueType::ARRAY) {
    const size_t es = value_type_size(type);
    const uint8_t* p = c.take(es, "value");
    if (type == ValueType::BOOL) check_bool(c, p[0], std::numeric_limits<uint64_t>::max());
    return ValueAccess::make(key, type, type, 0, p, es, file);
  }

  const uint32_t et_id = c.u32("array element type");
  const std::optional<ValueType> et = value_type_from_id(et_id);
  if (!et) c.fail("array element type id {} is not a GGUF value type (0..12)", et_id);
  if (*et == ValueType::ARRAY) c.fail("nested arrays (array of array) are not supported");
  const size_t count_at = c.pos();
  const uint64_t n = c.u64("array length");
  const uint8_t* start = c.here();
  const size_t start_pos = c.pos();
  if (*et == ValueType::STRING) {
    if (n > c.remaining() / 8)
      c.fail("string array length {} at offset {} cannot fit in the {} bytes left (file size {})",
             n, count_at, c.remaining(), c.pos() + c.remaining());
    for (uint64_t i = 0; i < n; ++i) {
      const size_t at = c.pos();
      const uint64_t len = detail::load<uint64_t>(c.take(8, "string array element length"));
      if (len > c.remaining())
        c.fail("element {} of the string array at offset {} has length {}, which runs past the "
               "end of the file ({} bytes left)",
               i, at, len, c.remaining());
      c.take(len, "string array element");
    }
  } else {
    const size_t es = value_type_size(*et);
    if (n > c.remaining() / es)
      c.fail("array of {} {} elements at offset {} runs past the end of the file ({} bytes left)",
             n, value_type_name(*et), count_at, c.remaining());
    c.take(n * es, "array data");
    if (*et == ValueType::BOOL)
      for (uint64_t i = 0; i < n; ++i) check_bool(c, start[i], i);
  }
  return ValueAccess::make(key, type, *et, n, start, c.pos() - start_pos, file);
}

std::string shape_string(const TensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

}  // namespace

struct File::Impl {
  std::string name;
  MappedFile map;  // empty for from_memory
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint32_t version = 0;
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<Value> kvs;
  std::unordered_map<std::string_view, size_t> kv_index;  // keys view the file bytes
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> tensor_index;

  void parse();
  void parse_tensor_info(Cursor& c, uint64_t i);
};

void File::Impl::parse() {
  Cursor c(data, size, name);
  if (size < 4) c.fail("not a GGUF file: only {} bytes, too small for the magic", size);
  const uint32_t magic = c.u32("magic");
  if (magic != kMagic) {
    std::string shown(reinterpret_cast<const char*>(data), 4);
    c.fail("not a GGUF file: bad magic {} (0x{:08x}), expected \"GGUF\"", quote(shown), magic);
  }
  version = c.u32("version");
  if (version == 1) c.fail("GGUF version 1 is not supported (only versions 2 and 3)");
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3)
      c.fail("version field 0x{:08x} is a big-endian GGUF file, which is not supported", version);
    c.fail("unsupported GGUF version {} (only versions 2 and 3)", version);
  }
  const uint64_t n_tensors = c.u64("n_tensors");
  const uint64_t n_kv = c.u64("n_kv");
  const uint64_t rem = c.remaining();
  if (n_kv > rem / kMinKvBytes)
    c.fail("n_kv = {} is larger than the file could hold: {} bytes remain after the header and "
           "each KV needs at least {}",
           n_kv, rem, kMinKvBytes);
  if (n_tensors > (rem - n_kv * kMinKvBytes) / kMinTensorInfoBytes)
    c.fail("n_tensors = {} is larger than the file could hold: {} bytes remain after the header "
           "and each tensor info needs at least {} (plus {} per KV)",
           n_tensors, rem, kMinTensorInfoBytes, kMinKvBytes);

  kvs.reserve(n_kv);
  kv_index.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    c.set_subject(fmt::format("KV #{}", i));
    const std::string_view key = c.string("key");
    if (key.size() > kMaxKeyLength)
      c.fail("key length {} exceeds the GGUF limit of {} bytes", key.size(), kMaxKeyLength);
    c.set_subject(fmt::format("key {}", quote(key)));
    const uint32_t type_id = c.u32("value type");
    const std::optional<ValueType> type = value_type_from_id(type_id);
    if (!type) c.fail("unknown value type id {} (valid: 0..12)", type_id);
    Value v = read_value(c, *type, key, &name);
    const auto [it, inserted] = kv_index.emplace(key, kvs.size());
    if (!inserted) c.fail("duplicate key (KV #{} and KV #{})", it->second, i);
    kvs.push_back(v);
  }

  if (const auto it = kv_index.find(kAlignmentKey); it != kv_index.end()) {
    const Value& a = kvs[it->second];
    c.set_subject(fmt::format("key {}", quote(kAlignmentKey)));
    if (a.type() != ValueType::UINT32)
      c.fail("has type {}, expected uint32", value_type_name(a.type()));
    const uint32_t al = a.as<uint32_t>();
    if (al == 0 || al % 8 != 0) c.fail("alignment {} is not a non-zero multiple of 8", al);
    alignment = al;
  }

  tensors.reserve(n_tensors);
  tensor_index.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) parse_tensor_info(c, i);

  // c.pos() <= size < 2^63, so rounding up cannot wrap.
  data_offset = (c.pos() + alignment - 1) / alignment * alignment;
  if (!tensors.empty() && data_offset > size) {
    c.set_subject("data section");
    c.fail("starts at offset {} (end of the tensor infos, {}, rounded up to the alignment {}), "
           "past the end of the file (size {}): file truncated?",
           data_offset, c.pos(), alignment, size);
  }
  const uint64_t avail = tensors.empty() ? 0 : size - data_offset;
  for (TensorInfo& t : tensors) {
    c.set_subject(fmt::format("tensor {}", quote(t.name)));
    if (t.offset % alignment != 0)
      c.fail("offset {} is not a multiple of the alignment {}", t.offset, alignment);
    if (t.offset > avail)
      c.fail("offset {} lies past the end of the file: the data section starts at {} and holds "
             "{} bytes (file size {})",
             t.offset, data_offset, avail, size);
    if (t.nbytes > avail - t.offset)
      c.fail("data ({} bytes at data offset {}) runs past the end of the file: only {} bytes "
             "follow that offset (data section at {}, file size {}): file truncated?",
             t.nbytes, t.offset, avail - t.offset, data_offset, size);
    t.data = data + data_offset + t.offset;
  }
  // Tensors whose bytes overlap read each other's data: a model then runs on wrong weights with
  // no error (two tensors at one offset loaded and produced a perplexity of 160,000).
  std::vector<size_t> by_offset;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].nbytes > 0) by_offset.push_back(i);
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo &p = tensors[by_offset[k - 1]], &t = tensors[by_offset[k]];
    if (p.offset + p.nbytes > t.offset) {
      c.set_subject(fmt::format("tensor {}", quote(t.name)));
      c.fail("data at offset {} overlaps tensor {} ({} bytes at offset {})", t.offset, quote(p.name), p.nbytes,
             p.offset);
    }
  }
}

void File::Impl::parse_tensor_info(Cursor& c, uint64_t i) {
  c.set_subject(fmt::format("tensor info #{}", i));
  const std::string_view tname = c.string("tensor name");
  c.set_subject(fmt::format("tensor {}", quote(tname)));
  if (tname.size() > kMaxTensorName)
    c.fail("name is {} bytes long; the GGUF limit is {}", tname.size(), kMaxTensorName);
  TensorInfo t;
  t.name = std::string(tname);
  const uint32_t n_dims = c.u32("n_dims");
  if (n_dims == 0 || n_dims > static_cast<uint32_t>(kMaxDims))
    c.fail("n_dims = {} is out of range (1..{})", n_dims, kMaxDims);
  t.n_dims = static_cast<int>(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = c.u64("ne");
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      c.fail("ne[{}] = {} is negative as int64", d, ne);
    t.ne[d] = static_cast<int64_t>(ne);
  }
  const uint32_t type_id = c.u32("type");
  const std::optional<DType> dt = dtype_from_id(type_id);
  if (!dt) c.fail("unknown or retired ggml type id {}", type_id);
  t.type = *dt;
  t.offset = c.u64("offset");

  // The product of the non-zero dims must fit in int64, so that any partial product computed
  // downstream (strides, row counts) fits too, even for an empty tensor.
  int64_t n_nonzero = 1;
  bool empty = false;
  for (int d = 0; d < kMaxDims; ++d) {
    if (t.ne[d] == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(n_nonzero, t.ne[d], &n_nonzero))
      c.fail("shape {} has more elements than fit in int64", shape_string(t));
  }
  const DTypeTraits& tr = dtype_traits(t.type);
  if (t.ne[0] % tr.block_size != 0)
    c.fail("ne[0] = {} is not a multiple of the {} block size {}", t.ne[0], tr.name,
           tr.block_size);
  uint64_t nbytes = 0;
  if (!empty) {
    nbytes = static_cast<uint64_t>(t.ne[0] / tr.block_size);
    bool overflow = __builtin_mul_overflow(nbytes, tr.type_size, &nbytes);
    for (int d = 1; d < kMaxDims; ++d)
      overflow = overflow || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(t.ne[d]), &nbytes);
    if (overflow || nbytes > std::numeric_limits<size_t>::max())
      c.fail("byte size of the {} tensor of shape {} overflows", tr.name, shape_string(t));
  }
  t.nbytes = static_cast<size_t>(nbytes);

  const auto [it, inserted] = tensor_index.emplace(tname, tensors.size());
  if (!inserted) c.fail("duplicate tensor name (tensor infos #{} and #{})", it->second, i);
  tensors.push_back(std::move(t));
}

File::File(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

File::File(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
  impl_->name = path.string();
  impl_->map = MappedFile(path);
  impl_->data = impl_->map.data();
  impl_->size = impl_->map.size();
  impl_->parse();
}

File File::from_memory(std::span<const uint8_t> bytes, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->data = bytes.data();
  impl->size = bytes.size();
  impl->parse();
  return File(std::move(impl));
}

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

const std::string& File::name() const { return impl_->name; }
uint32_t File::version() const { return impl_->version; }
uint32_t File::alignment() const { return impl_->alignment; }
uint64_t File::data_offset() const { return impl_->data_offset; }
std::span<const uint8_t> File::bytes() const { return {impl_->data, impl_->size}; }
std::span<const Value> File::kvs() const { return impl_->kvs; }
std::span<const TensorInfo> File::tensors() const { return impl_->tensors; }

const Value* File::find(std::string_view key) const {
  const auto it = impl_->kv_index.find(key);
  return it == impl_->kv_index.end() ? nullptr : &impl_->kvs[it->second];
}

const Value& File::get(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  throw Error(fmt::format("{}: key {} not found", impl_->name, quote(key)));
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
  if (const TensorInfo* t = find_tensor(name)) return *t;
  throw Error(fmt::format("{}: tensor {} not found", impl_->name, quote(name)));
}

}  // namespace minfer::gguf
