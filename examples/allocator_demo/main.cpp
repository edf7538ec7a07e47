// allocator_demo: plans the intermediate buffers of a toy transformer layer with minfer_allocator
// and prints where each buffer lives in the arena, then shows the reserve/allocate cycle a backend
// runs for prefill and decode graphs.
//
// Usage: minfer-allocator_demo [n_tokens]   (default 8)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "minfer/allocator.h"

namespace {

using minfer::alloc::BufferRequest;

// A graph as a list of nodes: node i writes buffer i at step i and reads earlier buffers, which
// sets their last_use. This is what a tensor layer derives from its compute graph.
struct Schedule {
  std::vector<BufferRequest> requests;
  std::vector<std::string> names;

  int node(const char* name, size_t bytes, std::vector<int> inputs, int inplace_of = -1) {
    const int id = static_cast<int>(requests.size());
    requests.push_back({.size = bytes, .alignment = 256, .first_use = id, .last_use = id,
                        .inplace_of = inplace_of});
    names.emplace_back(name);
    for (int in : inputs) requests[static_cast<size_t>(in)].last_use = id;
    return id;
  }
};

// One pre-norm transformer block (attention + SwiGLU FFN) over n_tokens tokens, f32 activations.
// In-place candidates are the element-wise ops: rope, softmax, the residual adds, the activation.
Schedule transformer_layer(size_t n_tokens) {
  const size_t n_embd = 512, n_embd_kv = 128, n_ff = 1536, n_head = 8, n_kv = 64 + n_tokens;
  const size_t f32 = 4;
  const size_t act = n_tokens * n_embd * f32;
  Schedule s;
  const int x = s.node("inp_embd", act, {});
  const int norm = s.node("attn_norm", act, {x});
  const int q = s.node("Qcur", act, {norm});
  const int k = s.node("Kcur", n_tokens * n_embd_kv * f32, {norm});
  const int v = s.node("Vcur", n_tokens * n_embd_kv * f32, {norm});
  const int q_rope = s.node("Qcur_rope", act, {q}, q);
  const int k_rope = s.node("Kcur_rope", n_tokens * n_embd_kv * f32, {k}, k);
  const int kq = s.node("kq", n_head * n_tokens * n_kv * f32, {q_rope, k_rope});
  const int probs = s.node("kq_softmax", n_head * n_tokens * n_kv * f32, {kq}, kq);
  const int attn = s.node("kqv_out", act, {probs, v});
  const int o = s.node("attn_out", act, {attn});
  const int h = s.node("ffn_inp", act, {x, o}, x);
  const int norm2 = s.node("ffn_norm", act, {h});
  const int gate = s.node("ffn_gate", n_tokens * n_ff * f32, {norm2});
  const int up = s.node("ffn_up", n_tokens * n_ff * f32, {norm2});
  const int swiglu = s.node("ffn_swiglu", n_tokens * n_ff * f32, {gate, up}, gate);
  const int down = s.node("ffn_down", act, {swiglu});
  const int out = s.node("l_out", act, {h, down}, h);
  s.requests[static_cast<size_t>(out)].last_use = minfer::alloc::kForever;  // graph output
  return s;
}

void print_layout(const Schedule& s, const minfer::alloc::Layout& layout) {
  std::printf("%-12s %10s %7s %10s\n", "buffer", "bytes", "steps", "offset");
  for (size_t i = 0; i < s.requests.size(); ++i) {
    const BufferRequest& r = s.requests[i];
    const std::string last = r.last_use == minfer::alloc::kForever ? "end" : std::to_string(r.last_use);
    const bool inplace = r.inplace_of >= 0 &&
                         layout.offsets[i] == layout.offsets[static_cast<size_t>(r.inplace_of)];
    std::printf("%-12s %10zu %3d..%-3s %10zu %s%s\n", s.names[i].c_str(), r.size, r.first_use,
                last.c_str(), layout.offsets[i], inplace ? "in place of " : "",
                inplace ? s.names[static_cast<size_t>(r.inplace_of)].c_str() : "");
  }
  const auto& st = layout.stats;
  std::size_t total = 0;
  for (const BufferRequest& r : s.requests) total += r.size;
  std::printf(
      "arena %zu bytes (sum of all buffers %zu, peak live %zu, ratio %.3f); %zu requests, "
      "%zu slots, %zu in-place, %zu bytes reused\n",
      layout.arena_size, total, st.peak_live_bytes,
      static_cast<double>(layout.arena_size) / static_cast<double>(st.peak_live_bytes),
      st.n_requests, st.n_slots, st.inplace_hits, st.bytes_reused);
}

}  // namespace

int main(int argc, char** argv) {
  const long n_tokens = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 8;
  if (n_tokens < 1 || n_tokens > 1 << 20) {
    std::fprintf(stderr, "usage: %s [n_tokens in 1..1048576]\n", argv[0]);
    return 1;
  }
  try {
    const Schedule prefill = transformer_layer(static_cast<size_t>(n_tokens));
    std::printf("== one transformer layer, %ld tokens ==\n", n_tokens);
    print_layout(prefill, minfer::alloc::plan_layout(prefill.requests));

    // The backend's cycle: reserve the worst case once, allocate that many bytes once, then place
    // each graph in it. Decode graphs (1 token) alternate with prefill; both stay cached.
    minfer::alloc::GraphAllocator allocator;
    allocator.reserve(prefill.requests);
    std::printf("\nreserved arena: %zu bytes (malloc/cudaMalloc once; buffer i at base + offset)\n",
                allocator.arena_size());
    const Schedule decode = transformer_layer(1);
    for (int step = 0; step < 6; ++step) {
      const Schedule& graph = step % 3 == 0 ? prefill : decode;
      const auto& layout = allocator.allocate(graph.requests);
      std::printf("step %d: %-7s graph needs %8zu bytes\n", step,
                  step % 3 == 0 ? "prefill" : "decode", layout.arena_size);
    }
    std::printf("plans: %zu, layout reuses: %zu\n", allocator.n_plans(),
                allocator.n_layout_reuses());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
