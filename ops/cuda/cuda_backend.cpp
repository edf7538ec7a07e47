// CudaBackend: buffers, transfers, the dispatch loop and CUDA-graph capture/replay.
#include "ops/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <unordered_map>
#include <vector>

#include "ops/cuda/kernels.cuh"
#include "ops/cuda/nccl_collective.h"

namespace minfer {
namespace cuda {

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line, const std::string& what) {
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  throw std::runtime_error(fmt::format("{}: {} failed: {} ({}) at {}:{}", what, call, cudaGetErrorName(e),
                                       cudaGetErrorString(e), file, line));
}

void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {} failed: cuBLAS status {} ({}) at {}:{}", what, call, static_cast<int>(s),
                                       cublasGetStatusString(s), file, line));
}

std::string KernelContext::where() const {
  if (!node) return "cuda";
  return fmt::format("cuda {} node #{} {}", op_name(node->op), node_index, describe(*node));
}

void KernelContext::check_launch(const char* kernel) const {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: launching {} failed: {} ({})", where(), kernel, cudaGetErrorName(e),
                                         cudaGetErrorString(e)));
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

const std::array<KernelEntry, kOpCount>& kernel_table() {
  static const std::array<KernelEntry, kOpCount> table = [] {
    std::array<KernelEntry, kOpCount> t{};
    auto set = [&t](Op op, Kernel k, Supports s = nullptr, Workspace w = nullptr) {
      t[static_cast<size_t>(op)] = {k, s, w};
    };
    set(Op::CPY, k_cpy, s_cpy);
    set(Op::GET_ROWS, k_get_rows, s_get_rows);
    set(Op::ADD, k_add);
    set(Op::MUL, k_mul);
    set(Op::SCALE, k_scale);
    set(Op::RMS_NORM, k_rms_norm);
    set(Op::MUL_MAT, k_mul_mat, s_mul_mat, w_mul_mat);
    set(Op::ROPE, k_rope);
    set(Op::SOFT_MAX, k_soft_max);
    set(Op::SILU, k_silu);
    set(Op::SWIGLU, k_swiglu);
    set(Op::ATTENTION, k_attention, nullptr, w_attention);
    set(Op::KV_STORE, k_kv_store);
    set(Op::CONCAT, k_concat);
    set(Op::ARGMAX, k_argmax);
    set(Op::TOP_K, k_top_k);
    set(Op::MUL_MAT_ID, k_mul_mat_id, s_mul_mat_id, w_mul_mat_id);
    set(Op::QKV, k_qkv, s_qkv, w_qkv);
    set(Op::FFN_SWIGLU, k_ffn_swiglu, s_ffn_swiglu, w_ffn_swiglu);
    set(Op::MUL_MAT_ADD, k_mul_mat_add, s_mul_mat_add, w_mul_mat);
    set(Op::RMS_NORM_Q8_1, k_rms_norm_q8_1, s_rms_norm_q8_1);
    set(Op::MOE_SUM, k_moe_sum, s_moe_sum);
    set(Op::ALL_REDUCE, k_all_reduce);
    set(Op::ALL_GATHER, k_all_gather, s_all_gather, w_all_gather);
    return t;
  }();
  return table;
}

namespace {

constexpr size_t kStagingChunk = size_t{64} << 20;  // pinned staging for large transfers
constexpr size_t kCublasWorkspace = size_t{32} << 20;
constexpr size_t kMaxCapturedGraphs = 32;

}  // namespace

struct BackendImpl;

class DeviceBuffer final : public Buffer {
 public:
  DeviceBuffer(Backend& b, BackendImpl& impl, int device, void* p, size_t size)
      : backend_(b), impl_(impl), device_(device), p_(p), size_(size) {}
  ~DeviceBuffer() override;
  void* base() const override { return p_; }
  size_t size() const override { return size_; }
  Backend& backend() const override { return backend_; }
  void fill(uint8_t value) override;

 private:
  Backend& backend_;
  BackendImpl& impl_;
  int device_;
  void* p_;
  size_t size_;
};

struct BackendImpl {
  int device = 0;
  CudaOptions options;
  std::string name;
  cudaDeviceProp prop{};
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_ws = nullptr;
  DeviceError* err_host = nullptr;  // host-mapped pinned
  DeviceError* err_dev = nullptr;
  void* staging[2] = {nullptr, nullptr};
  cudaEvent_t staging_done[2] = {nullptr, nullptr};

  bool last_used_gemm = false;
  bool capturing = false;

  // The tensor-parallel group (CudaBackend::join) and this backend's rank in it. Destroyed after
  // the captured graphs (members go after the destructor's body), as NCCL needs.
  std::shared_ptr<NcclCollective> group;
  int rank = 0;

  // Captured graphs.
  struct Entry {
    std::vector<uint64_t> key;
    int seen = 0;
    bool no_capture = false;  // ran cuBLAS GEMMs: GPU-bound, capture gains nothing
    bool failed = false;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_use = 0;
  };
  std::unordered_map<uint64_t, Entry> graphs;
  std::vector<uint64_t> key_buf;
  size_t n_exec = 0;
  uint64_t tick = 0;
  bool graphs_on = true;

  // Names of error-capable nodes of the last computed graph, by node index.
  std::vector<std::string> node_names;
  std::vector<Op> node_ops;

  CudaBackend::Stats stats;

  void set_device() const { MINFER_CUDA_CHECK(cudaSetDevice(device), name); }

  void drop_graphs() {
    for (auto& [k, e] : graphs)
      if (e.exec) cudaGraphExecDestroy(e.exec);
    graphs.clear();
    n_exec = 0;
  }

  void evict_one() {
    auto victim = graphs.end();
    for (auto it = graphs.begin(); it != graphs.end(); ++it)
      if (it->second.exec && (victim == graphs.end() || it->second.last_use < victim->second.last_use)) victim = it;
    if (victim != graphs.end()) {
      cudaGraphExecDestroy(victim->second.exec);
      graphs.erase(victim);
      --n_exec;
    }
  }

  static bool can_error(Op op) {
    return op == Op::GET_ROWS || op == Op::KV_STORE || op == Op::ATTENTION || op == Op::SOFT_MAX || op == Op::QKV;
  }

  void record_names(const Graph& g) {
    const auto& nodes = g.nodes();
    node_names.resize(nodes.size());
    node_ops.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      node_ops[i] = nodes[i]->op;
      if (can_error(nodes[i]->op)) node_names[i] = nodes[i]->name;
    }
  }

  void run_nodes(Graph& g) {
    const auto& table = kernel_table();
    const auto& nodes = g.nodes();
    bool used_gemm = false;
    // Per-node times only when nothing is captured, and not on a graph's first run: CUDA loads a
    // kernel's module at its first launch (lazy loading), and the GPU, queued behind the gate,
    // waits for the host there, which put 0.7-2 ms on the first attention and QKV nodes.
    const bool timed = options.profile && !graphs_on && prof[ev_key].count > 0;
    if (timed) node_event();                            // node i's time: from event i to event i + 1
    for (size_t i = 0; i < nodes.size(); ++i) {
      Tensor* t = nodes[i];
      if (op_is_view(t->op) || t->op == Op::NONE) continue;
      const KernelEntry& k = table[static_cast<size_t>(t->op)];
      if (!k.run || (k.supports && !k.supports(*t)))
        throw OpError(fmt::format("{}: no kernel for {} (node #{} {})", name, op_name(t->op), i, describe(*t)));
      if (!t->data) throw std::logic_error(fmt::format("{}: node #{} {} has no storage", name, i, describe(*t)));
      KernelContext kc{stream, cublas, &prop, &options, err_dev, t, static_cast<int32_t>(i)};
      kc.group = group.get();
      kc.rank = rank;
      kc.work = static_cast<char*>(t->work);
      kc.work_bytes = t->work ? t->work_bytes : 0;
      k.run(kc, *t);
      if (timed) {
        node_event();
        node_labels.push_back(node_label(*t));
      }
      used_gemm |= kc.used_gemm;
      ++stats.kernel_nodes;
    }
    last_used_gemm = used_gemm;
    if (timed) collect_node_times();
  }

  // CudaOptions::profile on a graph that runs eagerly (--no-cuda-graphs): GPU time of every kernel
  // node from events between consecutive nodes, queued behind compute()'s profile_gate so the GPU
  // runs them back to back, summed per label (op, dtype, shape and the first named
  // source without its layer number) and printed beside the per-graph figures.
  struct NodeProf {
    uint64_t count = 0;
    double ms = 0;
  };
  std::unordered_map<std::string, NodeProf> node_prof;
  std::vector<cudaEvent_t> node_events;
  std::vector<std::string> node_labels;
  size_t node_events_used = 0;

  // op, dtype, shape and the first named source (a matmul's weight: "blk.#.ffn_down.weight").
  static std::string node_label(const Tensor& t) {
    std::string_view name = t.name;
    for (const Tensor* s : t.src)
      if (name.empty() && s && !s->name.empty()) name = s->name;
    std::string n;
    for (size_t i = 0; i < name.size(); ++i) {
      const char c = name[i];
      if (c >= '0' && c <= '9' && (n.empty() || n.back() == '.')) {
        while (i + 1 < name.size() && name[i + 1] >= '0' && name[i + 1] <= '9') ++i;
        n += '#';
      } else {
        n += c;
      }
    }
    return fmt::format("{} {} [{}x{}x{}] {}", op_name(t.op), dtype_name(t.type), t.ne[0], t.ne[1], t.ne[2], n);
  }

  void node_event() {
    if (node_events_used == node_events.size()) {
      cudaEvent_t e = nullptr;
      MINFER_CUDA_CHECK(cudaEventCreate(&e), name);
      node_events.push_back(e);
    }
    MINFER_CUDA_CHECK(cudaEventRecord(node_events[node_events_used++], stream), name);
  }

  void collect_node_times() {
    if (node_events_used == 0) return;
    MINFER_CUDA_CHECK(cudaEventSynchronize(node_events[node_events_used - 1]), name);
    for (size_t i = 0; i + 1 < node_events_used; ++i) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, node_events[i], node_events[i + 1]) != cudaSuccess) continue;
      NodeProf& p = node_prof[node_labels[i]];
      ++p.count;
      p.ms += ms;
    }
    node_events_used = 0;
    node_labels.clear();
  }

  void print_node_profile() {
    if (node_prof.empty()) return;
    std::vector<std::pair<std::string, NodeProf>> v(node_prof.begin(), node_prof.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0;
    for (const auto& [label, p] : v) total += p.ms;
    std::fprintf(stderr, "[cuda profile] kernel nodes run eagerly (each graph's first run left out): %.3f ms of GPU time in all\n",
                 total);
    for (size_t i = 0; i < v.size() && i < 60; ++i)
      std::fprintf(stderr, "[cuda profile]   %6.2f %%  %10.1f us  x%-7llu %8.2f us each  %s\n", 100.0 * v[i].second.ms / total,
                   1e3 * v[i].second.ms, static_cast<unsigned long long>(v[i].second.count),
                   1e3 * v[i].second.ms / static_cast<double>(v[i].second.count), v[i].first.c_str());
  }

  // The exact description of what run_nodes() would launch: for every computing node its index,
  // op, dtype, shape, strides, params and data pointer, and the same for each source. Two graphs
  // with equal keys launch identical kernels with identical arguments, so a captured CUDA graph
  // of one replays the other. (Cheaper than Graph::structure_hash() and exact: hits compare the
  // whole key, not only its hash.)
  void build_key(const Graph& g, std::vector<uint64_t>& key) const {
    key.clear();
    auto push_tensor = [&key](const Tensor* t) {
      key.push_back(static_cast<uint64_t>(t->type) | (static_cast<uint64_t>(t->op) << 32));
      for (int d = 0; d < kMaxDims; ++d) key.push_back(static_cast<uint64_t>(t->ne[d]));
      for (int d = 0; d < kMaxDims; ++d) key.push_back(t->nb[d]);
      key.push_back(reinterpret_cast<uintptr_t>(t->data));
      key.push_back(reinterpret_cast<uintptr_t>(t->work));
    };
    const auto& nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Tensor* t = nodes[i];
      if (t->op == Op::NONE) continue;
      key.push_back(i);
      push_tensor(t);
      for (int p = 0; p < kMaxOpParams; p += 2)
        key.push_back(static_cast<uint32_t>(t->op_params[p]) | (static_cast<uint64_t>(static_cast<uint32_t>(t->op_params[p + 1])) << 32));
      for (int si = 0; si < kMaxSrc; ++si)
        if (const Tensor* s = t->src[si]) {
          key.push_back(0xABCD0000ull + si);
          push_tensor(s);
        }
    }
  }

  static uint64_t hash_key(const std::vector<uint64_t>& key) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t v : key) h = (h ^ v) * 1099511628211ull;
    return h;
  }

  // CudaOptions::profile: host time in compute() and GPU time (events around the queued work)
  // per graph key, printed to stderr when the backend is destroyed.
  struct Prof {
    uint64_t count = 0, gpu_count = 0;
    double host_ms = 0, gpu_ms = 0;
    size_t nodes = 0;
  };
  std::unordered_map<uint64_t, Prof> prof;
  cudaEvent_t ev_start = nullptr, ev_end = nullptr;
  uint64_t ev_key = 0;
  bool ev_pending = false;

  void compute(Graph& g) {
    if (!options.profile) return compute_impl(g);
    if (!ev_start) {
      MINFER_CUDA_CHECK(cudaEventCreate(&ev_start), name);
      MINFER_CUDA_CHECK(cudaEventCreate(&ev_end), name);
    }
    collect_gpu_time();
    const auto t0 = std::chrono::steady_clock::now();
    build_key(g, key_buf);
    ev_key = hash_key(key_buf);
    // Eagerly run graphs are queued behind a 50 ms gate, so the GPU runs their kernels back to
    // back and the events time the kernels, not the host's launches of them.
    if (!graphs_on) profile_gate(stream, 50'000'000);
    MINFER_CUDA_CHECK(cudaEventRecord(ev_start, stream), name);
    compute_impl(g);
    MINFER_CUDA_CHECK(cudaEventRecord(ev_end, stream), name);
    ev_pending = true;
    Prof& p = prof[ev_key];
    ++p.count;
    p.nodes = g.nodes().size();
    p.host_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  void collect_gpu_time() {
    if (!ev_pending) return;
    if (cudaEventSynchronize(ev_end) != cudaSuccess) return;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ev_start, ev_end) == cudaSuccess) {
      prof[ev_key].gpu_ms += ms;
      ++prof[ev_key].gpu_count;
    }
    ev_pending = false;
  }

  void print_profile() {
    std::vector<std::pair<uint64_t, Prof>> v(prof.begin(), prof.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
    std::fprintf(stderr, "[cuda profile] %s: %llu computes, %llu replays, %llu captures\n", name.c_str(),
                 static_cast<unsigned long long>(stats.computes), static_cast<unsigned long long>(stats.graph_replays),
                 static_cast<unsigned long long>(stats.graph_captures));
    for (size_t i = 0; i < v.size() && i < 6; ++i) {
      const Prof& p = v[i].second;
      std::fprintf(stderr, "[cuda profile]   graph %016llx (%zu nodes) x%llu: host compute() %.1f us, GPU %.1f us avg\n",
                   static_cast<unsigned long long>(v[i].first), p.nodes, static_cast<unsigned long long>(p.count),
                   1e3 * p.host_ms / static_cast<double>(p.count),
                   p.gpu_count ? 1e3 * p.gpu_ms / static_cast<double>(p.gpu_count) : 0.0);
    }
  }

  void compute_impl(Graph& g) {
    set_device();
    // A replayed graph would launch NCCL kernels of aborted communicators.
    if (group && group->aborted())
      throw std::runtime_error(name + ": another rank of the tensor-parallel group failed; the group cannot compute again");
    ++stats.computes;
    record_names(g);
    if (!graphs_on) {
      run_nodes(g);
      return;
    }
    build_key(g, key_buf);
    const uint64_t key = hash_key(key_buf);
    Entry& e = graphs[key];
    if (e.key != key_buf) {  // a new key, or a hash collision: start over for this one
      if (e.exec) {
        cudaGraphExecDestroy(e.exec);
        --n_exec;
      }
      e = Entry{};
      e.key = key_buf;
    }
    e.last_use = ++tick;
    if (e.exec) {
      MINFER_CUDA_CHECK(cudaGraphLaunch(e.exec, stream), name + " graph replay");
      ++stats.graph_replays;
      return;
    }
    if (e.seen == 0 || e.failed || e.no_capture) {
      ++e.seen;
      run_nodes(g);
      e.no_capture = last_used_gemm;
      // Forget keys seen once (one-off prefill shapes) so the map stays small.
      if (graphs.size() > 64)
        for (auto it = graphs.begin(); it != graphs.end();)
          it = (!it->second.exec && it->first != key) ? graphs.erase(it) : std::next(it);
      return;
    }
    // Second sighting: capture, instantiate, launch.
    if (n_exec >= kMaxCapturedGraphs) evict_one();
    Entry& en = graphs[key];
    cudaGraph_t graph = nullptr;
    MINFER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), name + " capture");
    capturing = true;
    try {
      run_nodes(g);
    } catch (...) {
      capturing = false;
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      en.failed = true;
      run_nodes(g);  // eagerly; a real error throws again
      return;
    }
    capturing = false;
    const cudaError_t ce = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    cudaError_t ie = ce;
    if (ce == cudaSuccess) ie = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (ie != cudaSuccess) {
      cudaGetLastError();
      en.failed = true;
      run_nodes(g);
      return;
    }
    en.exec = exec;
    ++n_exec;
    ++stats.graph_captures;
    MINFER_CUDA_CHECK(cudaGraphLaunch(exec, stream), name + " graph launch");
  }

  void check_device_error() {
    if (err_host->code == kErrNone) return;
    const DeviceError r = *err_host;
    std::memset(err_host, 0, sizeof(DeviceError));
    const size_t ni = static_cast<size_t>(r.node);
    const std::string node = ni < node_names.size() ? fmt::format("node #{} '{}'", r.node, node_names[ni])
                                                    : fmt::format("node #{}", r.node);
    switch (r.code) {
      case kErrGetRowsId:
        throw OpError(fmt::format("GET_ROWS: id {} outside [0, {}) ({}, {})", r.value, r.limit, node, name));
      case kErrKvStorePos:
        throw OpError(fmt::format("KV_STORE: cell {} outside the cache's [0, {}) ({}, {})", r.value, r.limit, node,
                                  name));
      case kErrAttentionPos:
        throw OpError(fmt::format("ATTENTION: position {} outside the block table's {} positions ({}, {})", r.value,
                                  r.limit, node, name));
      case kErrAttentionSeq:
        throw OpError(fmt::format("ATTENTION: sequence {} outside the block table's {} rows ({}, {})", r.value, r.limit,
                                  node, name));
      case kErrAttentionBlock:
        throw OpError(fmt::format("ATTENTION: block table entry {} outside the cache's {} blocks ({}, {})", r.value,
                                  r.limit, node, name));
      case kErrMulMatIdId:
        throw OpError(fmt::format("MUL_MAT_ID: expert id {} outside [0, {}) ({}, {})", r.value, r.limit, node, name));
      case kErrSoftMaxPos:
        throw OpError(fmt::format("SOFT_MAX: negative position {} ({}, {})", r.value, node, name));
      default: throw OpError(fmt::format("{}: kernel error code {} at {}", name, r.code, node));
    }
  }

  // Waits for the stream. Joined to a group it polls (NcclCollective::synchronize): an NCCL
  // kernel waiting for a failed peer must not block this thread past the group's abort().
  void wait_stream(const std::string& what) {
    if (group) return group->synchronize(rank, stream);
    MINFER_CUDA_CHECK(cudaStreamSynchronize(stream), what);
  }

  void synchronize() {
    set_device();
    wait_stream(name + " synchronize");
    if (options.profile) collect_gpu_time();
    check_device_error();
  }

  ~BackendImpl() {
    cudaSetDevice(device);
    if (stream) {
      try {
        wait_stream(name);
      } catch (const std::exception&) {  // an aborted group: the stream has drained all the same
      }
    }
    if (options.profile) {
      collect_gpu_time();
      print_profile();
      print_node_profile();
    }
    for (cudaEvent_t e : node_events) cudaEventDestroy(e);
    if (ev_start) cudaEventDestroy(ev_start);
    if (ev_end) cudaEventDestroy(ev_end);
    drop_graphs();
    if (cublas) cublasDestroy(cublas);
    if (cublas_ws) cudaFree(cublas_ws);
    for (int i = 0; i < 2; ++i) {
      if (staging[i]) cudaFreeHost(staging[i]);
      if (staging_done[i]) cudaEventDestroy(staging_done[i]);
    }
    if (err_host) cudaFreeHost(err_host);
    if (stream) cudaStreamDestroy(stream);
  }
};

DeviceBuffer::~DeviceBuffer() {
  cudaSetDevice(device_);
  cudaFree(p_);  // synchronizes the device first
}

void DeviceBuffer::fill(uint8_t value) {
  impl_.set_device();
  MINFER_CUDA_CHECK(cudaMemsetAsync(p_, value, size_, impl_.stream), impl_.name + " fill");
}

}  // namespace cuda

using cuda::BackendImpl;

CudaBackend::CudaBackend(int device, const CudaOptions& options) : impl_(std::make_unique<BackendImpl>()) {
  BackendImpl& m = *impl_;
  m.device = device;
  m.options = options;
  m.graphs_on = options.graphs;
  m.name = fmt::format("cuda:{}", device);
  const int n = cuda::device_count();
  if (device < 0 || device >= n)
    throw std::runtime_error(fmt::format("CUDA device {} does not exist ({} device(s) found)", device, n));
  m.set_device();
  MINFER_CUDA_CHECK(cudaGetDeviceProperties(&m.prop, device), m.name);
  MINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), m.name);
  MINFER_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.err_host), sizeof(cuda::DeviceError), cudaHostAllocMapped),
                    m.name);
  std::memset(m.err_host, 0, sizeof(cuda::DeviceError));
  MINFER_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.err_dev), m.err_host, 0), m.name);
  for (int i = 0; i < 2; ++i) {
    MINFER_CUDA_CHECK(cudaHostAlloc(&m.staging[i], cuda::kStagingChunk, cudaHostAllocDefault), m.name);
    MINFER_CUDA_CHECK(cudaEventCreateWithFlags(&m.staging_done[i], cudaEventDisableTiming), m.name);
  }
  MINFER_CUBLAS_CHECK(cublasCreate(&m.cublas), m.name);
  MINFER_CUBLAS_CHECK(cublasSetStream(m.cublas, m.stream), m.name);
  MINFER_CUDA_CHECK(cudaMalloc(&m.cublas_ws, cuda::kCublasWorkspace), m.name);
  MINFER_CUBLAS_CHECK(cublasSetWorkspace(m.cublas, m.cublas_ws, cuda::kCublasWorkspace), m.name);
  MINFER_CUBLAS_CHECK(cublasSetMathMode(m.cublas, CUBLAS_DEFAULT_MATH), m.name);
}

CudaBackend::~CudaBackend() = default;

std::string_view CudaBackend::name() const { return impl_->name; }

int64_t CudaBackend::batch_invariant_rows() const { return cuda::kMmvqRows; }
int CudaBackend::device() const { return impl_->device; }
const CudaOptions& CudaBackend::options() const { return impl_->options; }
void CudaBackend::set_graphs_enabled(bool on) {
  impl_->graphs_on = on;
  if (!on) impl_->drop_graphs();
}
bool CudaBackend::graphs_enabled() const { return impl_->graphs_on; }
CudaBackend::Stats CudaBackend::stats() const { return impl_->stats; }

std::unique_ptr<Buffer> CudaBackend::alloc_buffer(size_t bytes) {
  BackendImpl& m = *impl_;
  m.set_device();
  const size_t n = std::max<size_t>(bytes, 1);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    throw OutOfMemoryError(fmt::format("{} ({}): cannot allocate {} bytes ({:.2f} GiB) of device memory: {}; {:.2f} GiB "
                                       "free of {:.2f} GiB",
                                       m.name, m.prop.name, bytes, bytes / 1073741824.0, cudaGetErrorString(e),
                                       free_b / 1073741824.0, total_b / 1073741824.0));
  }
  return std::make_unique<cuda::DeviceBuffer>(*this, m, m.device, p, bytes);
}

namespace {

void check_range(const Tensor& t, size_t offset, size_t n, const char* what, std::string_view dev) {
  const size_t total = t.nbytes();
  if (offset > total || n > total - offset)
    throw std::out_of_range(fmt::format("{} {}: bytes [{}, {}) outside {} ({} bytes)", dev, what, offset, offset + n,
                                        describe(t), total));
  if (!t.data) throw std::logic_error(fmt::format("{} {}: {} has no storage", dev, what, describe(t)));
}

}  // namespace

void CudaBackend::set_tensor(Tensor& t, const void* src, size_t offset, size_t n) {
  BackendImpl& m = *impl_;
  check_range(t, offset, n, "set_tensor", m.name);
  if (n == 0) return;
  m.set_device();
  char* dst = static_cast<char*>(t.data) + offset;
  const std::string what = m.name + " set_tensor " + t.name;
  if (n <= (size_t{1} << 20)) {
    MINFER_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, m.stream), what);
    return;
  }
  // Large uploads (weights) go through two pinned chunks so the host copy overlaps the DMA.
  const char* s = static_cast<const char*>(src);
  int slot = 0;
  for (size_t done = 0; done < n; done += cuda::kStagingChunk, slot ^= 1) {
    const size_t len = std::min(cuda::kStagingChunk, n - done);
    MINFER_CUDA_CHECK(cudaEventSynchronize(m.staging_done[slot]), what);
    std::memcpy(m.staging[slot], s + done, len);
    MINFER_CUDA_CHECK(cudaMemcpyAsync(dst + done, m.staging[slot], len, cudaMemcpyHostToDevice, m.stream), what);
    MINFER_CUDA_CHECK(cudaEventRecord(m.staging_done[slot], m.stream), what);
  }
  // The caller may reuse or unmap `src` now: every byte is already in pinned staging or on the device.
}

void CudaBackend::get_tensor(const Tensor& t, void* dst, size_t offset, size_t n) {
  BackendImpl& m = *impl_;
  check_range(t, offset, n, "get_tensor", m.name);
  m.set_device();
  const std::string what = m.name + " get_tensor " + t.name;
  const char* src = static_cast<const char*>(t.data) + offset;
  char* d = static_cast<char*>(dst);
  // Pinned memory (alloc_host) takes one DMA straight into it; other host memory goes through
  // the pinned staging chunk.
  cudaPointerAttributes attr{};
  const bool pinned = cudaPointerGetAttributes(&attr, dst) == cudaSuccess && attr.type == cudaMemoryTypeHost;
  cudaGetLastError();  // (a pointer the driver does not know is not an error worth keeping)
  if (pinned) MINFER_CUDA_CHECK(cudaMemcpyAsync(d, src, n, cudaMemcpyDeviceToHost, m.stream), what);
  for (size_t done = 0; !pinned && done < n; done += cuda::kStagingChunk) {
    const size_t len = std::min(cuda::kStagingChunk, n - done);
    MINFER_CUDA_CHECK(cudaEventSynchronize(m.staging_done[0]), what);
    MINFER_CUDA_CHECK(cudaMemcpyAsync(m.staging[0], src + done, len, cudaMemcpyDeviceToHost, m.stream), what);
    m.wait_stream(what);
    std::memcpy(d + done, m.staging[0], len);
  }
  if (pinned || n == 0) m.wait_stream(what);
  if (m.options.profile) m.collect_gpu_time();
  m.check_device_error();
}

std::shared_ptr<void> CudaBackend::alloc_host(size_t bytes) {
  BackendImpl& m = *impl_;
  m.set_device();
  void* p = nullptr;
  if (cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    throw OutOfMemoryError(fmt::format("{}: cannot allocate {} bytes of pinned host memory", m.name, bytes));
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

bool cuda::op_supported(const Tensor& node) {
  if (op_is_view(node.op) || node.op == Op::NONE) return true;
  const KernelEntry& k = kernel_table()[static_cast<size_t>(node.op)];
  if (!k.run) return false;
  return !k.supports || k.supports(node);
}

bool CudaBackend::supports_op(const Tensor& node) const {
  // The gathered shape is the group's size times the parts: only a group of that size computes it.
  if (node.op == Op::ALL_GATHER && node.param<int32_t>(0) != (impl_->group ? impl_->group->n_ranks() : 1)) return false;
  return cuda::op_supported(node);
}

void CudaBackend::join(std::shared_ptr<Collective> group, int rank) {
  BackendImpl& m = *impl_;
  auto nccl = std::dynamic_pointer_cast<cuda::NcclCollective>(group);
  if (!nccl) {
    const char* why = !group ? "none was given"
                      : cuda::nccl_available() ? "this is another kind (CPU and CUDA ranks cannot be mixed)"
                                               : "this build has no NCCL";
    throw std::invalid_argument(
        fmt::format("{}: a CUDA backend joins only an NCCL group of CUDA devices (cuda::NcclCollective); {}", m.name, why));
  }
  if (rank < 0 || rank >= nccl->n_ranks())
    throw std::invalid_argument(fmt::format("{}: rank {} outside the tensor-parallel group of {}", m.name, rank, nccl->n_ranks()));
  if (nccl->device(rank) != m.device)
    throw std::invalid_argument(fmt::format("{}: rank {} of this NCCL group is cuda:{}", m.name, rank, nccl->device(rank)));
  m.group = std::move(nccl);
  m.rank = rank;
  m.drop_graphs();  // graphs captured alone copy where the group now exchanges
}

void CudaBackend::rewrite(Context& ctx, Graph& g) const {
  if (impl_->options.fusion) cuda::rewrite_graph(ctx, g);
}

size_t CudaBackend::workspace_bytes(const Tensor& node) const {
  if (op_is_view(node.op) || node.op == Op::NONE) return 0;
  const cuda::KernelEntry& k = cuda::kernel_table()[static_cast<size_t>(node.op)];
  if (!k.workspace || (k.supports && !k.supports(node))) return 0;
  const BackendImpl& m = *impl_;
  const cuda::KernelContext kc{m.stream, m.cublas, &m.prop, &m.options, m.err_dev, &node, -1};
  return k.workspace(kc, node);
}

void CudaBackend::compute(Graph& g) { impl_->compute(g); }

void CudaBackend::synchronize() { impl_->synchronize(); }

}  // namespace minfer
