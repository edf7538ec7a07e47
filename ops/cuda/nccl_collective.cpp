// NcclCollective over NCCL (ops/cuda/CMakeLists.txt compiles this file when it finds NCCL, else
// nccl_collective_stub.cpp).
#include "ops/cuda/nccl_collective.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace minfer::cuda {

bool nccl_available() { return true; }

void prepare_nccl_environment() {
  // Forced, whatever the user set: NVLink multicast can take the host's GPUs out of service.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  // Connections made at init, so no collective waits on the host for a peer that may have failed.
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
}

struct NcclImpl {
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
                                           devices[static_cast<size_t>(rank)], rank, ncclGetErrorString(r),
                                           ncclGetLastError(comm)));
  }
};

namespace {

void check_cuda(cudaError_t e, const char* call, int device) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw std::runtime_error(fmt::format("cuda:{}: {} failed: {} ({})", device, call, cudaGetErrorName(e), cudaGetErrorString(e)));
}

}  // namespace

NcclCollective::NcclCollective(std::vector<int> devices) : impl_(std::make_unique<NcclImpl>()) {
  NcclImpl& m = *impl_;
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
  prepare_nccl_environment();
  m.devices = std::move(devices);
  const int n = static_cast<int>(m.devices.size());
  m.comms.assign(static_cast<size_t>(n), nullptr);
  m.locks = std::make_unique<std::mutex[]>(static_cast<size_t>(n));
  const ncclResult_t r = ncclCommInitAll(m.comms.data(), n, m.devices.data());
  if (r != ncclSuccess) {
    const std::string last = ncclGetLastError(nullptr);
    for (ncclComm_t c : m.comms)
      if (c) ncclCommAbort(c);
    throw std::runtime_error(fmt::format("NCCL could not create the communicators of cuda:{}: {}{}{}",
                                         fmt::join(m.devices, ",cuda:"), ncclGetErrorString(r), last.empty() ? "" : ": ",
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
  for (ncclComm_t c : m.comms)
    if (c) ncclCommDestroy(c);
}

int NcclCollective::n_ranks() const { return static_cast<int>(impl_->devices.size()); }

int NcclCollective::device(int rank) const {
  impl_->check_rank(rank, "device");
  return impl_->devices[static_cast<size_t>(rank)];
}

bool NcclCollective::aborted() const { return impl_->aborted.load(std::memory_order_acquire); }

void NcclCollective::queue_all_reduce_sum(int rank, const float* send, float* recv, size_t n, CUstream_st* stream) {
  impl_->with_comm(rank, "all-reduce", [&](ncclComm_t comm) {
    return ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, comm, stream);
  });
}

void NcclCollective::queue_all_gather(int rank, const float* send, size_t n, float* recv, CUstream_st* stream) {
  impl_->with_comm(rank, "all-gather", [&](ncclComm_t comm) {
    return ncclAllGather(send, recv, n, ncclFloat32, comm, stream);
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
      if (c) ncclCommAbort(c);
    }
  });
}

}  // namespace minfer::cuda
