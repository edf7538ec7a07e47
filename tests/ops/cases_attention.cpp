// kv_store and paged attention cases against a double loop over keys gathered through the block
// table (tests/common/paged_attention_case.h): GQA 1/2/4/7/8 (and 16), head dims 32..256, every
// cache dtype, decode, verify and prefill shapes, scattered and shared blocks, many sequences per
// batch, lengths 1..4097 and sampled long depths up to 32768, poisoned unused blocks, the naive
// and blocked CPU implementations, and scores past f16's range.
#include <cmath>

#include "cases.h"
#include "common/paged_attention_case.h"

namespace minfer::test {
namespace {

// Paged attention the slow way: gather each sequence's keys and values through the table, then a
// double-precision softmax per query.
std::vector<double> attention_ref(const PagedAttnCase& c, const PagedAttnLayout& L, const Nd& Q, const Nd& K,
                                  const Nd& V, double scale) {
  const int64_t d = c.d, dv = c.dv, n_head = c.n_head, n_head_kv = c.n_head_kv;
  std::vector<double> out;
  out.reserve(L.pos.size() * static_cast<size_t>(n_head * dv));
  std::vector<double> sc, acc(static_cast<size_t>(dv));
  for (size_t t = 0; t < L.pos.size(); ++t) {
    const int32_t s = L.seq[t], vis = L.pos[t] + 1;
    std::vector<int64_t> cell(static_cast<size_t>(vis));
    for (int64_t j = 0; j < vis; ++j)
      cell[static_cast<size_t>(j)] =
          static_cast<int64_t>(L.table[static_cast<size_t>(s) * static_cast<size_t>(L.max_blocks) +
                                       static_cast<size_t>(j / c.block_size)]) * c.block_size + j % c.block_size;
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t hk = h / (n_head / n_head_kv);
      const double* q = &Q.v[static_cast<size_t>((static_cast<int64_t>(t) * Q.ne[1] + h) * d)];
      sc.assign(static_cast<size_t>(vis), 0);
      double mx = -1e300;
      for (int64_t j = 0; j < vis; ++j) {
        const double* k = &K.v[static_cast<size_t>((cell[static_cast<size_t>(j)] * K.ne[1] + hk) * d)];
        double a = 0;
        for (int64_t i = 0; i < d; ++i) a += q[i] * k[i];
        sc[static_cast<size_t>(j)] = scale * a;
        mx = std::max(mx, sc[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (auto& x : sc) sum += (x = std::exp(x - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < vis; ++j) {
        const double p = sc[static_cast<size_t>(j)] / sum;
        const double* vr = &V.v[static_cast<size_t>((cell[static_cast<size_t>(j)] * V.ne[1] + hk) * dv)];
        for (int64_t i = 0; i < dv; ++i) acc[static_cast<size_t>(i)] += p * vr[i];
      }
      out.insert(out.end(), acc.begin(), acc.end());
    }
  }
  return out;
}

// The case as a CaseRun, its block layout drawn at random (make_paged_layout).
CaseRun paged(const PagedAttnCase& c, ops::AttentionImpl impl = ops::AttentionImpl::AUTO) {
  const PagedAttnLayout L = make_paged_layout(c, rng());
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  CaseRun r;
  r.what = fmt::format("d={} heads {}/{} kv {} bs {} seqs {} queries {} shared {} impl {}", c.d, c.n_head, c.n_head_kv,
                       dn(c.kv_type), c.block_size, c.seq_len.size(), L.pos.size(), c.shared_blocks, static_cast<int>(impl));
  r.init = paged_init(c, L);
  r.build = [=](Context& ctx) {
    PagedAttnOp op;
    Tensor* out = build_paged_attention(ctx, c, L, scale, op, static_cast<int32_t>(impl));
    return Built{out, {op.q, op.k, op.v}};
  };
  r.reference = [=](const Inputs& in) { return attention_ref(c, L, Nd(in[0]), Nd(in[1]), Nd(in[2]), scale); };
  r.tol = 1e-10;
  // f16/q8_0 caches with head dims 64/128 run CUDA's tensor-core kernels (prefill and decode),
  // which round q and P to f16.
  const bool tensor_cores = c.kv_type != DType::F32 && c.d == c.dv && (c.d == 64 || c.d == 128);
  r.tol_device = device_tol(tensor_cores ? 2e-6 : 1e-9, 1e-10);
  return r;
}

// One sequence of past + T tokens whose T newest are the queries, its blocks scattered.
PagedAttnCase one_seq(int64_t d, int64_t n_head, int64_t n_head_kv, int64_t T, int64_t past, DType kv, int32_t bs) {
  PagedAttnCase c;
  c.d = c.dv = d;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.kv_type = kv;
  c.block_size = bs;
  c.seq_len = {static_cast<int32_t>(past + T)};
  c.n_query = {static_cast<int32_t>(T)};
  return c;
}

int32_t random_block_size() { return static_cast<int32_t>(int64_t{16} << rand_int(0, 2)); }

const char* impl_name(ops::AttentionImpl i) {
  return i == ops::AttentionImpl::NAIVE ? "naive" : i == ops::AttentionImpl::BLOCKED ? "blocked" : "auto";
}

void paged_cases(std::vector<OpCase>& v) {
  const DType kKv[] = {DType::F32, DType::F16, DType::Q8_0};
  // The CPU's two implementations: prefill from empty, decode at depth, a verify-like batch with a past.
  for (DType kv : kKv)
    for (auto impl : {ops::AttentionImpl::NAIVE, ops::AttentionImpl::BLOCKED})
      for (int64_t ratio : {1, 2, 7}) {
        const std::string p = fmt::format("attention_{}_{}_gqa{}", dn(kv), impl_name(impl), ratio);
        v.push_back({p + "_prefill7", [=] { return paged({64, 64, 2 * ratio, 2, kv, 16, {7}, {7}}, impl); }});
        v.push_back({p + "_decode_past133", [=] { return paged({64, 64, 2 * ratio, 2, kv, 16, {134}, {1}}, impl); }});
        v.push_back({p + "_verify33_past50", [=] { return paged({32, 32, ratio, 1, kv, 8, {83}, {33}}, impl); }});
      }
  // Decode, verify and prefill shapes of every kernel path a device has (split KV, tiles, tensor
  // cores, the GQA kernel), head dims 32..256.
  struct Shape {
    const char* name;
    int64_t d, n_head, n_head_kv, T, past;
  };
  for (DType kv : kKv) {
    std::vector<Shape> shapes;
    for (int64_t ratio : {1, 2, 7}) {
      shapes.push_back({"prefill7", 64, 2 * ratio, 2, 7, 0});          // short prefill (split path)
      shapes.push_back({"decode_past4000", 64, 2 * ratio, 2, 1, 4000}); // decode, many splits
      shapes.push_back({"verify33_past50_d32", 32, ratio, 1, 33, 50});  // a verify-like batch with a past (tiles)
      shapes.push_back({"verify16_d128", 128, 2 * ratio, 2, 16, 0});    // a verify-sized batch (split path)
      shapes.push_back({"batch64_d128", 128, 2 * ratio, 2, 64, 0});     // the split path's largest batch
      shapes.push_back({"batch65_d128", 128, 2 * ratio, 2, 65, 0});     // just past the split threshold (tiles)
    }
    shapes.push_back({"prefill100_past150_d128", 128, 4, 2, 100, 150});  // prefill with a past, several tiles
    shapes.push_back({"qwen25_7b_prefill300_past700", 128, 28, 4, 300, 700});
    shapes.push_back({"d64_nogqa_t129_past63", 64, 8, 8, 129, 63});  // a partial last query tile
    shapes.push_back({"d256_t20_past3", 256, 2, 1, 20, 3});          // opt-in shared memory
    shapes.push_back({"d96_first_token", 96, 3, 3, 1, 0});           // not a power of two
    shapes.push_back({"qwen25_7b_decode_past4400", 128, 28, 4, 1, 4400});  // GQA kernel, group 7
    shapes.push_back({"qwen3_8b_verify3_past200", 128, 32, 8, 3, 200});    // GQA kernel, group 4
    shapes.push_back({"d256_gqa8_decode_past69", 256, 16, 2, 1, 69});      // the GQA kernel's limit
    shapes.push_back({"gqa16_decode_past99", 64, 16, 1, 1, 99});           // the generic split kernel
    for (const Shape& s : shapes) {
      const std::string name = fmt::format("attention_{}_{}_h{}_{}", dn(kv), s.name, s.n_head, s.n_head_kv);
      v.push_back({name, [=] { return paged(one_seq(s.d, s.n_head, s.n_head_kv, s.T, s.past, kv, random_block_size())); }});
    }
  }
  // Many sequences of random lengths in one batch (CPU blocked implementation's shapes).
  for (int trial = 0; trial < 4; ++trial)
    v.push_back({fmt::format("attention_many_seqs_small{}", trial), [=] {
      PagedAttnCase c;
      c.kv_type = trial % 2 ? DType::F16 : DType::Q8_0;
      c.block_size = static_cast<int32_t>(int64_t{1} << rand_int(0, 6));
      c.interleave = trial >= 2;
      const auto n_seq = static_cast<size_t>(rand_int(2, 9));
      for (size_t s = 0; s < n_seq; ++s) {
        c.seq_len.push_back(static_cast<int32_t>(rand_int(1, 300)));
        c.n_query.push_back(static_cast<int32_t>(rand_int(1, std::min<int64_t>(c.seq_len.back(), 5))));
      }
      return paged(c, ops::AttentionImpl::BLOCKED);
    }});
  // Many sequences per batch: decode (one query each) or prompt chunks, shared prefixes.
  for (int trial = 0; trial < 8; ++trial)
    v.push_back({fmt::format("attention_many_seqs{}", trial), [=] {
      PagedAttnCase c;
      c.d = c.dv = trial % 2 ? 128 : 64;
      c.n_head = 8;
      c.n_head_kv = 2;
      c.kv_type = trial % 3 == 0 ? DType::Q8_0 : DType::F16;
      c.block_size = static_cast<int32_t>(int64_t{1} << rand_int(3, 7));
      c.interleave = trial >= 6;
      const auto n_seq = static_cast<size_t>(rand_int(2, 16));
      const bool decode = trial % 4 < 2;
      for (size_t i = 0; i < n_seq; ++i) {
        c.seq_len.push_back(static_cast<int32_t>(rand_int(1, 1500)));
        c.n_query.push_back(decode ? 1 : static_cast<int32_t>(rand_int(1, std::min<int64_t>(c.seq_len.back(), 80))));
      }
      c.shared_blocks = trial % 2 ? 2 : 0;
      return paged(c);
    }});
  // Prefill chunks of three sequences in one batch, GQA 7: CUDA's tensor-core kernel takes 128
  // queries a block, so its second query tile holds the end of one sequence, all of a second (at
  // depth 1000) and the start of a third, each masked causally at its own positions.
  for (DType kv : {DType::F16, DType::Q8_0})
    for (int64_t d : {64, 128})
      v.push_back({fmt::format("attention_{}_prefill_three_seqs_d{}", dn(kv), d), [=] {
        PagedAttnCase c;
        c.d = c.dv = d;
        c.n_head = 14;
        c.n_head_kv = 2;
        c.kv_type = kv;
        c.block_size = random_block_size();
        c.seq_len = {150, 1070, 127};
        c.n_query = {150, 70, 90};
        return paged(c);
      }});
  // Forked sequences sharing their prefix blocks (32 shared tokens).
  for (auto impl : {ops::AttentionImpl::NAIVE, ops::AttentionImpl::BLOCKED})
    v.push_back({fmt::format("attention_forked_shared_prefix_{}", impl_name(impl)), [=] {
      PagedAttnCase c;
      c.block_size = 16;
      c.seq_len = {70, 90, 40};
      c.n_query = {2, 3, 1};
      c.shared_blocks = 2;
      return paged(c, impl);
    }});
  // Sequence lengths from 1 to 32768 (one of them sampled).
  for (int32_t len : {1, 2, 15, 16, 17, 63, 64, 65, 255, 1000, 4095, 4096, 4097, -1, 32768})
    v.push_back({len < 0 ? std::string("attention_len_sampled_4098_32767") : fmt::format("attention_len{}", len), [=] {
      const auto n = len < 0 ? static_cast<int32_t>(rand_int(4098, 32767)) : len;
      PagedAttnCase c;
      c.d = c.dv = 64;
      c.n_head = 2;
      c.n_head_kv = 1;
      c.block_size = 32;
      c.seq_len = {n};
      c.n_query = {std::min(n, 2)};
      return paged(c, ops::AttentionImpl::BLOCKED);
    }});
  // Two sequences (one shared block) at lengths around block and tile edges.
  for (int32_t len : {1, 31, 32, 33, 63, 64, 65, 4095, 4096, 4097})
    v.push_back({fmt::format("attention_two_seqs_len{}", len), [=] {
      PagedAttnCase c;
      c.d = c.dv = 128;
      c.n_head = 8;
      c.n_head_kv = 4;
      c.block_size = 32;
      c.seq_len = {len, len};
      c.n_query = {1, std::min(len, 20)};
      c.shared_blocks = 1;
      return paged(c);
    }});
  // Long contexts at sampled depths up to 32768 keys: a decode step and a 128-query prefill chunk
  // at the end of the past, GQA 1/2/4/7/8, head dims 64/128, f16 and q8_0 caches.
  struct Heads {
    int64_t n_head, n_head_kv;
  };
  for (int trial = 0; trial < 6; ++trial)
    for (int64_t T : {1, 128})
      v.push_back({fmt::format("attention_long_sampled{}_t{}", trial, T), [=] {
        const Heads heads[] = {{2, 2}, {4, 2}, {8, 2}, {7, 1}, {8, 1}};
        const int64_t d = trial % 2 ? 128 : 64;
        const Heads h = heads[rand_int(0, 4)];
        const DType kv = trial % 3 == 2 ? DType::Q8_0 : DType::F16;
        const int64_t past = rand_int(1, 32768 - 128);
        return paged(one_seq(d, h.n_head, h.n_head_kv, T, past, kv, random_block_size()));
      }});
  v.push_back({"attention_f16_decode_32768_keys", [] { return paged(one_seq(128, 8, 1, 1, 32767, DType::F16, random_block_size())); }});
  v.push_back({"attention_q8_0_prefill128_32768_keys", [] {
    return paged(one_seq(128, 8, 1, 128, 32640, DType::Q8_0, random_block_size()));
  }});
  // Two 128-dim vectors of 24.0 have a dot of 73,728, over f16's 65,504: the scores must not
  // overflow. Equal scores: the output is the mean of the two V rows, (24 - 1) / 2.
  for (DType kv : {DType::F32, DType::F16})
    for (auto impl : {ops::AttentionImpl::NAIVE, ops::AttentionImpl::BLOCKED})
      v.push_back({fmt::format("attention_{}_{}_scores_past_f16_range", dn(kv), impl_name(impl)), [=] {
        CaseRun r;
        r.init = [](Tensor& leaf) {
          if (leaf.type == DType::I32) {  // position 1 of sequence 0, whose block 0 holds both rows
            static_cast<int32_t*>(leaf.data)[0] = leaf.name == "pos" ? 1 : 0;
            return;
          }
          std::vector<float> vals(static_cast<size_t>(leaf.nelements()), 24.0f);
          if (leaf.name == "v")
            for (int64_t i = 0; i < 128; ++i) vals[static_cast<size_t>(128 + i)] = -1.0f;
          for (int64_t row = 0; row < leaf.nrows(); ++row)
            quantize_row(leaf.type, vals.data() + row * 128, static_cast<char*>(leaf.data) + row * leaf.row_size(), 128);
        };
        r.build = [=](Context& c) {
          Tensor* q = c.new_tensor(DType::F32, {128, 1, 1}, "q");
          Tensor* k = c.new_tensor(kv, {128, 1, 2}, "k");
          Tensor* vv = c.new_tensor(kv, {128, 1, 2}, "v");
          return Built{ops::attention(c, q, k, vv, c.new_tensor(DType::I32, {1}, "pos"), c.new_tensor(DType::I32, {1}, "seq"),
                                      c.new_tensor(DType::I32, {1, 1}, "table"), 2, 1.0f, impl),
                       {}};
        };
        r.reference = [](const Inputs&) { return std::vector<double>(128, 11.5); };
        r.tol = 1e-10;
        r.tol_device = 1e-9;
        r.check = [](const std::vector<float>& got, const Inputs&, const Backend& b) {
          for (float x : got) {
            ASSERT_TRUE(std::isfinite(x)) << b.name();
            EXPECT_NEAR(x, 11.5f, 1e-4) << b.name();
          }
        };
        return r;
      }});
}

void kv_store_cases(std::vector<OpCase>& v) {
  for (DType ct : {DType::F32, DType::F16, DType::Q8_0})
    for (bool strided : {false, true})
      v.push_back({fmt::format("kv_store_{}{}", dn(ct), strided ? "_strided_x" : ""), [=] {
        const int64_t d = 64, nkv = 2, n_ctx = 20, T = 5;
        CaseRun r;
        r.init = [](Tensor& leaf) {
          if (leaf.type != DType::I32) return fill_random(leaf);
          const int32_t p[] = {3, 4, 5, 17, 0};
          std::copy(p, p + 5, static_cast<int32_t*>(leaf.data));
        };
        r.build = [=](Context& c) {
          Tensor* cache = c.new_tensor(ct, {d, nkv, n_ctx});
          Tensor* x;
          if (strided) {  // the K heads inside a fused qkv row
            Tensor* xbase = c.new_tensor(DType::F32, {d * 3, T});
            x = view(c, xbase, {d, nkv, T}, {static_cast<size_t>(d) * 4, xbase->nb[1]}, static_cast<size_t>(d) * 4);
          } else {
            x = c.new_tensor(DType::F32, {d, nkv, T});
          }
          Tensor* cells = c.new_tensor(DType::I32, {T});
          return Built{ops::kv_store(c, cache, x, cells), {cache, x, cells}};
        };
        // The cache as it was, with the rows at the cells replaced by x rounded to the cache dtype.
        r.reference = [=](const Inputs& in) {
          Nd C(in[0]);
          const Nd X(in[1]);
          const auto p = ints(in[2]);
          for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < nkv; ++h)
              for (int64_t i = 0; i < d; ++i)
                C.at(i, h, p[static_cast<size_t>(t)]) = ct == DType::F16 ? round_f16(X.at(i, h, t)) : X.at(i, h, t);
          return C.v;
        };
        r.tol = ct == DType::Q8_0 ? 1e-4 : 0;  // q8_0: within its quantization error
        return r;
      }});
}

}  // namespace

void add_attention_cases(std::vector<OpCase>& v) {
  paged_cases(v);
  kv_store_cases(v);
}

}  // namespace minfer::test
