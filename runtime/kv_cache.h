// KvCache: the paged key/value cache shared by every sequence of a model on one backend (or on
// the backends of a tensor-parallel group: one storage per rank, one bookkeeping).
//
// Storage. Layer l holds k(l): [head_dim, n_head_kv, n_cells] and v(l): [head_dim_v, n_head_kv,
// n_cells] of F16 (default), F32 or Q8_0. Cells are grouped in blocks of block_size consecutive
// cells; block b owns cells [b * block_size, (b + 1) * block_size). The pool hands out blocks
// 0 .. n_blocks - 1 (alloc::BlockPool, reference-counted); one more block past them, the null
// block, is never handed out: padding rows of a batch write there and read from there.
//
// Sequences. A sequence is a slot id in [0, n_seq_max) with a length and a row of the block
// table: token position p of sequence s lives in cell table[s][p / block_size] * block_size +
// p % block_size. The table is a device tensor I32 [max_blocks_per_seq, n_seq_max + 1] (row
// n_seq_max, the null sequence, points at the null block everywhere) that attention reads, so a
// decode graph works at any depth and for any mix of sequences; rows changed on the host are
// uploaded by sync() before the forward pass.
//
// Sharing. seq_fork() gives a new sequence the same blocks (reference counts + 1); the first
// append into a shared, partly filled last block copies it first (copy on write), so forks never
// see each other's tokens. Truncating (speculative rollback) releases whole blocks past the new
// end. Blocks whose content is identified by a hash (prefix caching: set_block_hash) survive
// their sequences as cached free blocks until the pool needs them.
//
// The pool takes the cells -c asks for (n_ctx, rounded up to whole blocks): sequences draw from
// it as they grow, and none is given a worst-case reservation.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "minfer/block_pool.h"
#include "tensor/backend.h"
#include "tensor/context.h"

namespace minfer {

/// A sequence does not fit its context (n_ctx_seq): the message gives both lengths and suggests -c.
class ContextFullError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The KV pool has no free block for the sequence that asked; other sequences are untouched. The
/// message names the sequence and the block counts.
class KvPoolFullError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct KvCacheParams {
  int32_t n_ctx = 0;        ///< cells of the pool (total tokens over all sequences), > 0
  int32_t block_size = 32;  ///< cells per block, a power of two in [1, 1024]
  int32_t n_seq_max = 1;    ///< sequences that may exist at once, >= 1
  int32_t n_ctx_seq = 0;    ///< tokens one sequence may hold (0: n_ctx); sets the block-table width
  DType type = DType::F16;
};

class KvCache {
 public:
  /// Allocates the caches and the block table. Throws std::invalid_argument for bad params or an
  /// unsupported dtype (F16, F32, Q8_0; Q8_0 needs head dims % 32 == 0) and OutOfMemoryError when
  /// the backend cannot hold them (the message gives the size and suggests a smaller -c).
  KvCache(Backend& backend, int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v,
          const KvCacheParams& p);
  /// Tensor parallelism: one set of caches (n_head_kv heads each: a rank's share) and block table
  /// per backend in `shards` (rank order), one bookkeeping for all, so every rank's cells, blocks
  /// and tables are the same. Throws what the single-backend constructor throws.
  KvCache(const std::vector<Backend*>& shards, int32_t n_layer, int32_t n_head_kv, int32_t head_dim,
          int32_t head_dim_v, const KvCacheParams& p);

  /// Rank `shard`'s caches and block table (I32 [max_blocks_per_seq, n_seq_max + 1]) on its backend.
  Tensor* k(int layer, int shard = 0) const { return store(shard).k.at(static_cast<size_t>(layer)); }
  Tensor* v(int layer, int shard = 0) const { return store(shard).v.at(static_cast<size_t>(layer)); }
  Tensor* block_table(int shard = 0) const { return store(shard).table; }
  int n_shards() const { return static_cast<int>(stores_.size()); }

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return pool_.n_blocks(); }
  int32_t n_ctx() const { return pool_.n_blocks() * block_size_; }  ///< pool cells
  int32_t n_ctx_seq() const { return n_ctx_seq_; }
  int32_t n_seq_max() const { return n_seq_max_; }
  int32_t max_blocks_per_seq() const { return max_blocks_; }
  /// The block-table row of padding tokens (all null block).
  int32_t null_seq() const { return n_seq_max_; }
  /// A cell of the null block, where padding tokens store.
  int32_t null_cell() const { return pool_.n_blocks() * block_size_; }
  size_t bytes() const { return bytes_; }  ///< of one shard
  DType type() const { return type_; }
  Backend& backend(int shard = 0) const { return *store(shard).backend; }

  // ---- sequences ----
  /// A new empty sequence. Throws std::runtime_error when n_seq_max sequences exist.
  int32_t seq_new();
  /// A new sequence holding the same tokens as `src`, sharing its blocks. Throws like seq_new()
  /// and std::out_of_range for a sequence that does not exist.
  int32_t seq_fork(int32_t src);
  /// Ends a sequence: its blocks are released and its id can be reused.
  void seq_free(int32_t s);
  /// Keeps the first n tokens (0 <= n <= length); whole blocks past them return to the pool.
  void seq_truncate(int32_t s, int32_t n);
  int32_t seq_len(int32_t s) const;
  bool seq_exists(int32_t s) const;
  int32_t n_seq() const { return n_seq_; }

  /// Blocks that appending n tokens to s would take from the pool now (new blocks plus a
  /// copy-on-write of a shared last block).
  int32_t blocks_needed(int32_t s, int32_t n) const;
  /// Makes room for n tokens after s's length, appends their cells to `cells` and adds n to the
  /// length. All or nothing: throws ContextFullError when the length would pass n_ctx_seq and
  /// KvPoolFullError when the pool lacks blocks (s and every other sequence unchanged).
  void seq_append(int32_t s, int32_t n, std::vector<int32_t>& cells);
  /// The cell of token position p of sequence s (p < length).
  int32_t cell(int32_t s, int32_t p) const;
  /// The blocks of s in position order.
  const std::vector<int32_t>& seq_blocks(int32_t s) const;

  /// Registers block i of s (which must be full) as holding the content `hash` (prefix caching).
  /// Returns false when another block already holds that hash.
  bool set_block_hash(int32_t s, int32_t i, uint64_t hash);
  /// Appends to s (which must be empty or end at a block boundary) the cached block holding
  /// `hash`, if any, and returns true; its block_size tokens then count as s's. False: no such block.
  bool seq_append_cached(int32_t s, uint64_t hash);

  /// Uploads block-table rows changed since the last call. Call before each forward pass.
  void sync();

  const alloc::BlockPool& pool() const { return pool_; }
  alloc::BlockPool& pool() { return pool_; }

  /// Bytes per cell over all layers (K and V), for sizing n_ctx against a budget.
  static size_t bytes_per_cell(int32_t n_layer, int32_t n_head_kv, int32_t head_dim, int32_t head_dim_v, DType type);

 private:
  struct Seq {
    bool live = false;
    int32_t len = 0;
    std::vector<int32_t> blocks;
  };
  Seq& seq(int32_t s);
  const Seq& seq(int32_t s) const;
  void set_row(int32_t s);
  void copy_block(int32_t from, int32_t to, int32_t n_cells);

  // One rank's storage: its caches and block table in a buffer of its backend.
  struct Store {
    Backend* backend = nullptr;
    std::unique_ptr<Context> ctx;
    std::unique_ptr<Buffer> buffer;
    std::vector<Tensor*> k, v;
    Tensor* table = nullptr;
  };
  const Store& store(int shard) const { return stores_.at(static_cast<size_t>(shard)); }

  std::vector<Store> stores_;
  alloc::BlockPool pool_;
  int32_t block_size_ = 0, n_seq_max_ = 0, n_ctx_seq_ = 0, max_blocks_ = 0;
  std::vector<Seq> seqs_;
  int32_t n_seq_ = 0;
  std::vector<int32_t> table_host_;
  int32_t dirty_lo_ = 0, dirty_hi_ = 0;  // rows [lo, hi) to upload
  size_t bytes_ = 0;
  DType type_;
};

}  // namespace minfer
