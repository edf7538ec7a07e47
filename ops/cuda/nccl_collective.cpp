// NcclCollective over NCCL, loaded at run time (dlopen; no binary links libnccl). One file for
// every build: where nccl.h is found (ops/cuda/CMakeLists.txt adds its directory), the NCCL calls
// are compiled in; without it (`__has_include(<nccl.h>)` false) they are compiled out and every
// group is refused with a message.
#include "ops/cuda/nccl_collective.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#if __has_include(<nccl.h>)
#include <nccl.h>
#define MINFER_NCCL_HEADER 1
#else
#define MINFER_NCCL_HEADER 0
#endif

namespace minfer::cuda {

bool nccl_available() { return MINFER_NCCL_HEADER; }

void prepare_nccl_environment() {
  // Forced, whatever the user set: NVLink multicast can take the host's GPUs out of service.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  // Connections made at init, so no collective waits on the host for a peer that may have failed.
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
}

const std::vector<std::string>& nccl_library_names() {
  static const std::vector<std::string> names{"libnccl.so.2", "libnccl.so"};
  return names;
}

namespace {

// The constructor's checks before NCCL: a device list that names each existing device once.
void check_devices(const std::vector<int>& devices) {
  if (devices.empty()) throw std::invalid_argument("NcclCollective: no CUDA device listed");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0) throw std::invalid_argument(fmt::format("NcclCollective: CUDA device {} does not exist", devices[i]));
    if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i), devices[i]) !=
        devices.begin() + static_cast<std::ptrdiff_t>(i))
      throw std::invalid_argument(fmt::format("NcclCollective: cuda:{} is listed twice (one rank per device)", devices[i]));
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  const int highest = *std::max_element(devices.begin(), devices.end());
  if (highest >= count)
    throw std::runtime_error(fmt::format("tensor parallelism over cuda:{}: needs {} CUDA devices (up to cuda:{}), {} found",
                                         fmt::join(devices, ",cuda:"), devices.size(), highest, count));
}

std::string tried_list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", n);
  return s;
}

}  // namespace

#if MINFER_NCCL_HEADER

namespace {

void check_cuda(cudaError_t e, const char* call, int device) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw std::runtime_error(fmt::format("cuda:{}: {} failed: {} ({})", device, call, cudaGetErrorName(e), cudaGetErrorString(e)));
}

// Every NCCL function this file calls, resolved by name from the loaded library; the types are
// nccl.h's.
#define MINFER_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)              \
  X(ncclGetErrorString)          \
  X(ncclGetLastError)            \
  X(ncclCommInitAll)             \
  X(ncclCommDestroy)             \
  X(ncclCommAbort)               \
  X(ncclAllReduce)               \
  X(ncclAllGather)

struct NcclApi {
  NcclLibrary library;
#define X(f) decltype(&::f) f = nullptr;
  MINFER_NCCL_FUNCTIONS(X)
#undef X
};

std::string version_text(int code) {
  // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z since 2.9, X * 1000 + Y * 100 + Z before.
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code / 100 % 10, code % 100);
}

// Opens the first of `names` that loads with every function; throws naming each attempt.
NcclApi open_nccl(const std::vector<std::string>& names) {
  std::vector<std::string> failures;
  for (const std::string& name : names) {
    dlerror();
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      failures.push_back(fmt::format("dlopen(\"{}\"): {}", name, why ? why : "not found"));
      continue;
    }
    NcclApi api;
    api.library.name = name;
    std::string missing;
#define X(f)                                                      \
  if (missing.empty()) {                                          \
    api.f = reinterpret_cast<decltype(api.f)>(dlsym(handle, #f)); \
    if (!api.f) missing = #f;                                     \
  }
    MINFER_NCCL_FUNCTIONS(X)
#undef X
    Dl_info info{};
    if (missing.empty() && dladdr(reinterpret_cast<void*>(api.ncclGetVersion), &info) && info.dli_fname)
      api.library.path = info.dli_fname;
    if (!missing.empty()) {
      failures.push_back(fmt::format("\"{}\" was loaded but has no {} (not NCCL, or an NCCL older than minfer needs)", name, missing));
      dlclose(handle);
      continue;
    }
    int& v = api.library.version;
    if (api.ncclGetVersion(&v) != ncclSuccess || v / (v >= 10000 ? 10000 : 1000) != NCCL_MAJOR) {
      failures.push_back(fmt::format("\"{}\" ({}) is NCCL version {}, not {}.x", name, api.library.path,
                                     version_text(api.library.version), NCCL_MAJOR));
      dlclose(handle);
      continue;
    }
    return api;  // the handle stays open for the life of the process
  }
  throw std::runtime_error(fmt::format(
      "multi-GPU tensor parallelism needs NCCL, loaded at run time, and it could not be loaded (tried {}): {}. Install "
      "NCCL {}.x (some CUDA toolkits have it in their lib directory; else the libnccl2 package or PyTorch's nvidia-nccl "
      "wheel) and put the directory holding libnccl.so.2 on LD_LIBRARY_PATH",
      tried_list(names), fmt::join(failures, "; "), NCCL_MAJOR));
}

// The process's library: loaded by the first group and kept (never freed: a group destroyed
// during exit may still call it); a failure is tried again next time.
const NcclApi& nccl_api() {
  static std::mutex mu;
  static const NcclApi* api = nullptr;
  std::lock_guard<std::mutex> lk(mu);
  if (!api) api = new NcclApi(open_nccl(nccl_library_names()));
  return *api;
}

}  // namespace

NcclLibrary load_nccl_library(const std::vector<std::string>& names) { return open_nccl(names).library; }

const NcclLibrary& nccl_library() { return nccl_api().library; }

struct NcclImpl {
  const NcclApi* api = nullptr;  // the process's library (nccl_api)
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;  // nullptr once handed to the aborter
  // NCCL allows one thread at a time on a communicator; the aborter takes a rank's lock to take
  // its communicator away, so no rank thread is inside NCCL with it when it is aborted.
  std::unique_ptr<std::mutex[]> locks;
  std::atomic<bool> aborted{false};
  std::thread aborter;

  void check_rank(int rank, const char* what) const {
    if (rank < 0 || rank >= static_cast<int>(devices.size()))
      throw std::invalid_argument(fmt::format("NcclCollective::{}: rank {} outside [0, {})", what, rank, devices.size()));
  }
  [[noreturn]] void throw_aborted(int rank, const char* what) const {
    throw std::runtime_error(fmt::format("{} on cuda:{} (rank {}): another rank of the tensor-parallel group failed",
                                         what, devices[static_cast<size_t>(rank)], rank));
  }
  // Runs `call` (one NCCL call on rank's communicator) under the rank's lock.
  template <typename F>
  void with_comm(int rank, const char* what, F&& call) {
    check_rank(rank, what);
    if (aborted.load(std::memory_order_acquire)) throw_aborted(rank, what);
    std::lock_guard<std::mutex> lk(locks[static_cast<size_t>(rank)]);
    ncclComm_t comm = comms[static_cast<size_t>(rank)];
    if (!comm || aborted.load(std::memory_order_acquire)) throw_aborted(rank, what);
    const ncclResult_t r = call(comm);
    if (r != ncclSuccess)
      throw std::runtime_error(fmt::format("{} on cuda:{} (rank {}): NCCL error: {} ({})", what,
                                           devices[static_cast<size_t>(rank)], rank, api->ncclGetErrorString(r),
                                           api->ncclGetLastError(comm)));
  }
};

NcclCollective::NcclCollective(std::vector<int> devices) : impl_(std::make_unique<NcclImpl>()) {
  NcclImpl& m = *impl_;
  check_devices(devices);
  m.api = &nccl_api();  // the first group of the process loads NCCL
  const NcclApi& nccl = *m.api;
  prepare_nccl_environment();
  m.devices = std::move(devices);
  const int n = static_cast<int>(m.devices.size());
  m.comms.assign(static_cast<size_t>(n), nullptr);
  m.locks = std::make_unique<std::mutex[]>(static_cast<size_t>(n));
  const ncclResult_t r = nccl.ncclCommInitAll(m.comms.data(), n, m.devices.data());
  if (r != ncclSuccess) {
    const std::string last = nccl.ncclGetLastError(nullptr);
    for (ncclComm_t c : m.comms)
      if (c) nccl.ncclCommAbort(c);
    throw std::runtime_error(fmt::format("NCCL {} ({}) could not create the communicators of cuda:{}: {}{}{}",
                                         version_text(nccl.library.version), nccl.library.path,
                                         fmt::join(m.devices, ",cuda:"), nccl.ncclGetErrorString(r), last.empty() ? "" : ": ",
                                         last));
  }
}

NcclCollective::~NcclCollective() {
  NcclImpl& m = *impl_;
  if (m.aborter.joinable()) {
    m.aborter.join();
    return;
  }
  // Intra-process communicators: NCCL frees them all at the last one's destroy.
  if (!m.api) return;
  for (ncclComm_t c : m.comms)
    if (c) m.api->ncclCommDestroy(c);
}

int NcclCollective::n_ranks() const { return static_cast<int>(impl_->devices.size()); }

int NcclCollective::device(int rank) const {
  impl_->check_rank(rank, "device");
  return impl_->devices[static_cast<size_t>(rank)];
}

bool NcclCollective::aborted() const { return impl_->aborted.load(std::memory_order_acquire); }

void NcclCollective::queue_all_reduce_sum(int rank, const float* send, float* recv, size_t n, CUstream_st* stream) {
  impl_->with_comm(rank, "all-reduce", [&](ncclComm_t comm) {
    return impl_->api->ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, comm, stream);
  });
}

void NcclCollective::queue_all_gather(int rank, const float* send, size_t n, float* recv, CUstream_st* stream) {
  impl_->with_comm(rank, "all-gather", [&](ncclComm_t comm) {
    return impl_->api->ncclAllGather(send, recv, n, ncclFloat32, comm, stream);
  });
}

void NcclCollective::synchronize(int rank, CUstream_st* stream) {
  NcclImpl& m = *impl_;
  m.check_rank(rank, "synchronize");
  const int device = m.devices[static_cast<size_t>(rank)];
  // Polled rather than cudaStreamSynchronize: a rank whose peer failed must notice abort().
  // After it, the aborted NCCL kernels return and the stream drains.
  for (unsigned spins = 0;; ++spins) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) check_cuda(e, "cudaStreamQuery", device);
    if (spins < 1024) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  if (aborted()) m.throw_aborted(rank, "synchronize");
}

namespace {

// Device scratch and a stream of one rank for the host-memory collectives.
struct Staging {
  int device;
  cudaStream_t stream = nullptr;
  float* buf = nullptr;
  Staging(int dev, size_t floats) : device(dev) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice", device);
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", device);
    check_cuda(cudaMalloc(&buf, std::max<size_t>(floats, 1) * sizeof(float)), "cudaMalloc", device);
  }
  ~Staging() {
    cudaSetDevice(device);
    if (stream) cudaStreamSynchronize(stream);
    cudaFree(buf);
    if (stream) cudaStreamDestroy(stream);
  }
  void upload(size_t at, const float* src, size_t n) {
    check_cuda(cudaMemcpyAsync(buf + at, src, n * sizeof(float), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync", device);
  }
  void download(float* dst, size_t n) {
    check_cuda(cudaMemcpyAsync(dst, buf, n * sizeof(float), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync", device);
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", device);
  }
};

}  // namespace

void NcclCollective::all_reduce_sum(int rank, float* data, size_t n) {
  Staging s(device(rank), n);
  s.upload(0, data, n);
  queue_all_reduce_sum(rank, s.buf, s.buf, n, s.stream);
  synchronize(rank, s.stream);
  s.download(data, n);
}

void NcclCollective::all_gather(int rank, const float* send, size_t n, float* recv) {
  const size_t total = n * static_cast<size_t>(n_ranks());
  Staging s(device(rank), total);
  s.upload(static_cast<size_t>(rank) * n, send, n);
  queue_all_gather(rank, s.buf + static_cast<size_t>(rank) * n, n, s.buf, s.stream);
  synchronize(rank, s.stream);
  s.download(recv, total);
}

void NcclCollective::abort() {
  NcclImpl& m = *impl_;
  if (m.aborted.exchange(true, std::memory_order_acq_rel)) return;
  // On a helper thread: the last communicator's ncclCommAbort returns only once the CUDA graphs
  // that captured its collectives are destroyed, which happens when the backends are, after the
  // caller (a rank thread) has returned. Each abort flag is set at the start of its call, so the
  // kernels waiting for a failed rank return at once.
  m.aborter = std::thread([&m] {
    for (size_t r = 0; r < m.comms.size(); ++r) {
      ncclComm_t c = nullptr;
      {
        std::lock_guard<std::mutex> lk(m.locks[r]);
        std::swap(c, m.comms[r]);
      }
      if (c) m.api->ncclCommAbort(c);
    }
  });
}

#else  // !MINFER_NCCL_HEADER: no nccl.h at compile time, so no group can be made

namespace {
[[noreturn]] void no_header(const std::string& what) {
  throw std::runtime_error(fmt::format("{}: this build of minfer has no NCCL support (nccl.h was not found when it was "
                                       "configured: install NCCL's header, e.g. libnccl-dev, or set NCCL_HOME, and "
                                       "reconfigure)",
                                       what));
}
[[noreturn]] void unreachable() { throw std::logic_error("NcclCollective: this build has no NCCL"); }
}  // namespace

NcclLibrary load_nccl_library(const std::vector<std::string>& names) {
  no_header(fmt::format("loading NCCL (tried {})", tried_list(names)));
}

const NcclLibrary& nccl_library() { no_header("loading NCCL"); }

struct NcclImpl {};

NcclCollective::NcclCollective(std::vector<int> devices) {
  check_devices(devices);
  no_header(fmt::format("tensor parallelism over cuda:{} needs NCCL", fmt::join(devices, ",cuda:")));
}

NcclCollective::~NcclCollective() = default;

int NcclCollective::n_ranks() const { return 0; }
int NcclCollective::device(int) const { unreachable(); }
void NcclCollective::all_reduce_sum(int, float*, size_t) { unreachable(); }
void NcclCollective::all_gather(int, const float*, size_t, float*) { unreachable(); }
void NcclCollective::queue_all_reduce_sum(int, const float*, float*, size_t, CUstream_st*) { unreachable(); }
void NcclCollective::queue_all_gather(int, const float*, size_t, float*, CUstream_st*) { unreachable(); }
void NcclCollective::synchronize(int, CUstream_st*) { unreachable(); }
void NcclCollective::abort() {}
bool NcclCollective::aborted() const { return false; }

#endif  // MINFER_NCCL_HEADER

}  // namespace minfer::cuda
