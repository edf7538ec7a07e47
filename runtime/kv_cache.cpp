#include "runtime/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>

namespace minfer {
namespace {

int32_t checked_blocks(const KvCacheParams& p) {
  if (p.n_ctx <= 0) throw std::invalid_argument(fmt::format("KV cache: n_ctx must be positive, got {}", p.n_ctx));
  if (p.block_size < 1 || p.block_size > 1024 || !std::has_single_bit(static_cast<uint32_t>(p.block_size)))
    throw std::invalid_argument(fmt::format("KV cache: block size must be a power of two in [1, 1024], got {}", p.block_size));
  if (p.n_seq_max < 1) throw std::invalid_argument(fmt::format("KV cache: n_seq_max must be >= 1, got {}", p.n_seq_max));
  if (p.n_ctx_seq < 0) throw std::invalid_argument(fmt::format("KV cache: n_ctx_seq must be >= 0, got {}", p.n_ctx_seq));
  const int64_t n_blocks = (int64_t{p.n_ctx} + p.block_size - 1) / p.block_size;
  // Cells are int32 indices, the null block's included.
  if ((n_blocks + 1) * p.block_size > INT32_MAX)
    throw std::invalid_argument(fmt::format("KV cache: {} cells in blocks of {} is past the {} cells a cache can index",
                                            p.n_ctx, p.block_size, int64_t{INT32_MAX} - 2 * p.block_size + 1));
  return static_cast<int32_t>(n_blocks);
}

}  // namespace

size_t KvCache::bytes_per_cell(int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, DType type) {
  const size_t per = dtype_row_size(type, head_dim) * static_cast<size_t>(n_head_kv) +
                     dtype_row_size(type, head_dim_v) * static_cast<size_t>(n_head_kv);
  return per * static_cast<size_t>(n_layer);
}

KvCache::KvCache(Backend& backend, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v,
                 const KvCacheParams& p)
    : KvCache(std::vector<Backend*>{&backend}, n_layer, n_head_kv, head_dim, head_dim_v, p) {}

KvCache::KvCache(const std::vector<Backend*>& shards, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
                 int32_t head_dim_v, const KvCacheParams& p)
    : pool_(0), block_size_(p.block_size), n_seq_max_(p.n_seq_max), type_(p.type) {
  // The pool's bookkeeping (per-block counters) is made after the caches are allocated: a -c
  // that no device can hold fails at the allocation, before gigabytes of host metadata exist.
  const int32_t n_blocks = checked_blocks(p);
  if (p.type != DType::F16 && p.type != DType::F32 && p.type != DType::Q8_0)
    throw std::invalid_argument(fmt::format("KV cache: dtype {} is not supported (f16, f32, q8_0)", dtype_name(p.type)));
  if (p.type == DType::Q8_0 && (head_dim % 32 != 0 || head_dim_v % 32 != 0))
    throw std::invalid_argument(fmt::format("KV cache: q8_0 needs head dims % 32 == 0, got {} / {}", head_dim, head_dim_v));
  if (shards.empty()) throw std::invalid_argument("KV cache: no backend");
  const int32_t n_ctx_pool = n_blocks * block_size_;
  n_ctx_seq_ = p.n_ctx_seq > 0 ? std::min(p.n_ctx_seq, n_ctx_pool) : n_ctx_pool;
  max_blocks_ = (n_ctx_seq_ + block_size_ - 1) / block_size_;  // within int32: checked_blocks
  const int64_t cells = (int64_t{n_blocks} + 1) * block_size_;  // + the null block
  bytes_ = bytes_per_cell(n_layer, n_head_kv, head_dim, head_dim_v, p.type) * static_cast<size_t>(cells);
  for (Backend* backend : shards) {
    Store st;
    st.backend = backend;
    st.ctx = std::make_unique<Context>();
    for (int l = 0; l < n_layer; ++l) {
      st.k.push_back(st.ctx->new_tensor(p.type, {head_dim, n_head_kv, cells}, fmt::format("cache_k_l{}", l)));
      st.v.push_back(st.ctx->new_tensor(p.type, {head_dim_v, n_head_kv, cells}, fmt::format("cache_v_l{}", l)));
    }
    st.table = st.ctx->new_tensor(DType::I32, {max_blocks_, n_seq_max_ + 1}, "kv_block_table");
    try {
      st.buffer = allocate_tensors(*st.ctx, *backend);
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError(fmt::format("KV cache of {} cells needs {:.1f} MiB on {}: {} (ask for a smaller context: "
                                         "-c, or fewer or shorter sequences)",
                                         n_ctx_pool, static_cast<double>(bytes_) / 1048576.0, backend->name(), e.what()));
    }
    stores_.push_back(std::move(st));
  }
  pool_ = alloc::BlockPool(n_blocks);
  seqs_.resize(static_cast<size_t>(n_seq_max_));
  table_host_.assign(static_cast<size_t>(max_blocks_) * static_cast<size_t>(n_seq_max_ + 1), n_blocks);
  dirty_lo_ = 0;
  dirty_hi_ = n_seq_max_ + 1;
  sync();
}

KvCache::Seq& KvCache::seq(int32_t s) {
  if (!seq_exists(s)) throw std::out_of_range(fmt::format("KV cache: sequence {} does not exist", s));
  return seqs_[static_cast<size_t>(s)];
}

const KvCache::Seq& KvCache::seq(int32_t s) const {
  if (!seq_exists(s)) throw std::out_of_range(fmt::format("KV cache: sequence {} does not exist", s));
  return seqs_[static_cast<size_t>(s)];
}

bool KvCache::seq_exists(int32_t s) const {
  return s >= 0 && s < n_seq_max_ && seqs_[static_cast<size_t>(s)].live;
}

int32_t KvCache::seq_len(int32_t s) const { return seq(s).len; }

const std::vector<int32_t>& KvCache::seq_blocks(int32_t s) const { return seq(s).blocks; }

int32_t KvCache::cell(int32_t s, int32_t p) const {
  const Seq& q = seq(s);
  if (p < 0 || p >= q.len) throw std::out_of_range(fmt::format("KV cache: position {} outside sequence {} of length {}", p, s, q.len));
  return q.blocks[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_;
}

void KvCache::set_row(int32_t s) {
  const Seq& q = seqs_[static_cast<size_t>(s)];
  int32_t* row = table_host_.data() + static_cast<size_t>(s) * static_cast<size_t>(max_blocks_);
  std::fill(row, row + max_blocks_, n_blocks());
  std::copy(q.blocks.begin(), q.blocks.end(), row);
  if (dirty_lo_ >= dirty_hi_) {
    dirty_lo_ = s;
    dirty_hi_ = s + 1;
  } else {
    dirty_lo_ = std::min(dirty_lo_, s);
    dirty_hi_ = std::max(dirty_hi_, s + 1);
  }
}

void KvCache::sync() {
  if (dirty_lo_ >= dirty_hi_) return;
  const size_t row = static_cast<size_t>(max_blocks_) * 4;
  for (const Store& st : stores_)
    st.backend->set_tensor(*st.table, table_host_.data() + static_cast<size_t>(dirty_lo_) * static_cast<size_t>(max_blocks_),
                           static_cast<size_t>(dirty_lo_) * row, static_cast<size_t>(dirty_hi_ - dirty_lo_) * row);
  dirty_lo_ = dirty_hi_ = 0;
}

int32_t KvCache::seq_new() {
  for (int32_t s = 0; s < n_seq_max_; ++s) {
    Seq& q = seqs_[static_cast<size_t>(s)];
    if (q.live) continue;
    q = Seq{true, 0, {}};
    ++n_seq_;
    set_row(s);
    return s;
  }
  throw std::runtime_error(fmt::format("KV cache: all {} sequence slots are in use (raise the parallel count)", n_seq_max_));
}

int32_t KvCache::seq_fork(int32_t src) {
  const Seq copy = seq(src);
  const int32_t s = seq_new();
  Seq& q = seqs_[static_cast<size_t>(s)];
  q.len = copy.len;
  q.blocks = copy.blocks;
  for (int32_t b : q.blocks) pool_.retain(b);
  set_row(s);
  return s;
}

void KvCache::seq_free(int32_t s) {
  Seq& q = seq(s);
  for (int32_t b : q.blocks) pool_.release(b);
  q = Seq{};
  --n_seq_;
  set_row(s);
}

void KvCache::seq_truncate(int32_t s, int32_t n) {
  Seq& q = seq(s);
  if (n < 0 || n > q.len) throw std::out_of_range(fmt::format("KV cache: truncate sequence {} to {} outside [0, {}]", s, n, q.len));
  const auto keep = static_cast<size_t>((n + block_size_ - 1) / block_size_);
  for (size_t i = keep; i < q.blocks.size(); ++i) pool_.release(q.blocks[i]);
  q.blocks.resize(keep);
  q.len = n;
  // A partly kept block that is ours alone will be written again: its content hash is void.
  if (n % block_size_ != 0 && pool_.ref_count(q.blocks.back()) == 1) pool_.clear_hash(q.blocks.back());
  set_row(s);
}

int32_t KvCache::blocks_needed(int32_t s, int32_t n) const {
  const Seq& q = seq(s);
  const int32_t have = static_cast<int32_t>(q.blocks.size());
  const int32_t want = static_cast<int32_t>((static_cast<int64_t>(q.len) + n + block_size_ - 1) / block_size_);
  const bool cow = n > 0 && q.len % block_size_ != 0 && pool_.ref_count(q.blocks.back()) > 1;
  return std::max(0, want - have) + (cow ? 1 : 0);
}

void KvCache::copy_block(int32_t from, int32_t to, int32_t n_cells) {
  std::vector<uint8_t> tmp;
  for (const Store& st : stores_)
    for (const auto* layer : {&st.k, &st.v})
      for (Tensor* t : *layer) {
        const size_t bytes = t->nb[2] * static_cast<size_t>(n_cells);
        tmp.resize(bytes);
        st.backend->get_tensor(*t, tmp.data(), t->nb[2] * static_cast<size_t>(from) * static_cast<size_t>(block_size_), bytes);
        st.backend->set_tensor(*t, tmp.data(), t->nb[2] * static_cast<size_t>(to) * static_cast<size_t>(block_size_), bytes);
      }
}

void KvCache::seq_append(int32_t s, int32_t n, std::vector<int32_t>& cells) {
  Seq& q = seq(s);
  if (n < 0) throw std::invalid_argument(fmt::format("KV cache: cannot append {} tokens", n));
  if (static_cast<int64_t>(q.len) + n > n_ctx_seq_)
    throw ContextFullError(fmt::format("the sequence needs {} positions ({} evaluated + {} new) but its context holds {} "
                                       "(n_ctx); use -c to raise it",
                                       static_cast<int64_t>(q.len) + n, q.len, n, n_ctx_seq_));
  const int32_t need = blocks_needed(s, n);
  std::vector<int32_t> fresh;
  if (!pool_.allocate(need, fresh))
    throw KvPoolFullError(fmt::format("KV cache: sequence {} needs {} more blocks of {} tokens but {} of {} are free "
                                      "({} sequences hold the rest); use -c to raise the pool",
                                      s, need, block_size_, pool_.n_free(), pool_.n_blocks(), n_seq_));
  size_t next = 0;
  const int32_t used = q.len % block_size_;
  if (n > 0 && used != 0 && pool_.ref_count(q.blocks.back()) > 1) {  // copy on write
    const int32_t mine = fresh[next++];
    copy_block(q.blocks.back(), mine, used);
    pool_.release(q.blocks.back());
    q.blocks.back() = mine;
  }
  while (next < fresh.size()) q.blocks.push_back(fresh[next++]);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t p = q.len + i;
    cells.push_back(q.blocks[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_);
  }
  q.len += n;
  if (need > 0) set_row(s);
}

bool KvCache::set_block_hash(int32_t s, int32_t i, uint64_t hash) {
  const Seq& q = seq(s);
  if (i < 0 || static_cast<int64_t>(i + 1) * block_size_ > q.len)
    throw std::out_of_range(fmt::format("KV cache: block {} of sequence {} (length {}) is not full", i, s, q.len));
  return pool_.set_hash(q.blocks[static_cast<size_t>(i)], hash);
}

bool KvCache::seq_append_cached(int32_t s, uint64_t hash) {
  Seq& q = seq(s);
  if (q.len % block_size_ != 0)
    throw std::logic_error(fmt::format("KV cache: sequence {} (length {}) does not end at a block boundary", s, q.len));
  if (q.len + block_size_ > n_ctx_seq_) return false;
  const int32_t b = pool_.find(hash);
  if (b < 0) return false;
  q.blocks.push_back(b);
  q.len += block_size_;
  set_row(s);
  return true;
}

}  // namespace minfer
