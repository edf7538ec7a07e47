// The tensor-parallel group of CUDA devices driven by one process: one NCCL communicator per
// rank (device), made together by ncclCommInitAll. CudaBackend::join takes it; the backend's
// ALL_REDUCE / ALL_GATHER kernels then queue ncclAllReduce / ncclAllGather on the backend's own
// stream, in place on device memory, so a decode step with its collectives stays one captured
// CUDA graph per device (the communicators exist before any capture, as NCCL requires).
//
//   auto group = std::make_shared<cuda::NcclCollective>(std::vector<int>{0, 1});
//   CudaBackend b0(0), b1(1);
//   b0.join(group, 0);
//   b1.join(group, 1);
//
// Environment: the constructor sets NCCL_NVLS_ENABLE=0 before its first NCCL call, overriding
// any value: NVLink multicast (NVLS) can take the host's GPUs out of service on the machines this
// runs on, so it is never used. NCCL_RUNTIME_CONNECT defaults to 0 (every connection is made
// during construction): a collective then never waits on the host for another rank's matching
// call, so one rank that stops cannot leave another blocked inside NCCL where abort() cannot reach.
//
// Failure: a rank that fails calls abort() (ModelRunner does): every communicator is aborted
// (ncclCommAbort, which makes NCCL kernels waiting for the failed rank return), and the other
// ranks' synchronize() and later collectives throw instead of waiting forever.
//
// NCCL is not linked: the first group of the process loads it at run time (dlopen of
// "libnccl.so.2", else "libnccl.so", through the loader's search path: LD_LIBRARY_PATH, the
// ldconfig cache, RUNPATH) and resolves the few functions used (dlsym). A process that makes no
// group, every single-GPU run, never loads it. Missing, the constructor throws saying what was
// tried and how to fix it (load_nccl_library).
//
// Compiled without nccl.h (it is needed at compile time for the types and signatures; see
// ops/cuda/CMakeLists.txt), nccl_available() is false and the constructor throws.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensor/collective.h"

struct CUstream_st;  // cudaStream_t is CUstream_st* (cuda_runtime.h is not needed to name it)

namespace minfer::cuda {

/// True when this build can drive NCCL (nccl_collective.cpp was compiled with nccl.h). Whether
/// the library is there is known only when a group loads it (nccl_library).
bool nccl_available();

/// The NCCL shared library as loaded at run time.
struct NcclLibrary {
  std::string name;  // the name dlopen took ("libnccl.so.2")
  std::string path;  // the file the loader found for it
  int version = 0;   // ncclGetVersion: 22805 for 2.28.5
};

/// The names a group tries, in order: {"libnccl.so.2", "libnccl.so"}.
const std::vector<std::string>& nccl_library_names();

/// Opens the first of `names` that dlopen loads and that has every NCCL function NcclCollective
/// calls (dlsym), and returns it; it stays loaded. Throws std::runtime_error naming each name
/// tried with the loader's reason (not found, or the function it lacks) and the fix (the
/// directory of libnccl.so.2 on LD_LIBRARY_PATH); in a build without nccl.h, saying so. Needs no
/// device. NcclCollective uses it through nccl_library(); tests call it with other names.
NcclLibrary load_nccl_library(const std::vector<std::string>& names);

/// The library this process's groups use: load_nccl_library(nccl_library_names()) the first time
/// it succeeds (tried again after a failure), then the same one. Throws like it.
const NcclLibrary& nccl_library();

/// Sets the environment every NCCL communicator of minfer is made under: NCCL_NVLS_ENABLE=0
/// (forced: NVLink multicast is never used), NCCL_RUNTIME_CONNECT=0 unless the user set it.
/// NcclCollective's constructor calls it; NCCL reads these once, at its first use in the process,
/// so calling it later changes nothing. Needs no device.
void prepare_nccl_environment();

struct NcclImpl;

class NcclCollective final : public Collective {
 public:
  /// Rank r is CUDA device devices[r]. Throws std::invalid_argument for an empty list, a negative
  /// or repeated device; std::runtime_error naming the devices when fewer CUDA devices exist than
  /// listed, when this build has no nccl.h or the NCCL library cannot be loaded (nccl_library's
  /// message), or when NCCL cannot create the communicators (the message holds
  /// ncclGetErrorString and NCCL's last error text).
  explicit NcclCollective(std::vector<int> devices);
  /// Destroys the communicators (ncclCommDestroy; after abort(), waits for the aborts to finish).
  /// Every backend that joined must be destroyed first: NCCL keeps a communicator until the CUDA
  /// graphs that captured its collectives are gone (CudaBackend holds the group until then).
  ~NcclCollective() override;
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  int n_ranks() const override;
  /// The CUDA device of rank `rank`.
  int device(int rank) const;

  /// Collective's host-memory forms: `data` / `send` / `recv` are host f32 arrays, staged through
  /// the rank's device; blocks until this rank's part is done (the other ranks must call too).
  /// For tests and tools: the backends use the queued forms below. Throws std::invalid_argument
  /// for a rank outside the group, std::runtime_error after abort() or when NCCL or CUDA fails.
  void all_reduce_sum(int rank, float* data, size_t n) override;
  void all_gather(int rank, const float* send, size_t n, float* recv) override;

  /// Queues the sum over the ranks of device f32 `send` [n] into `recv` [n] (ncclAllReduce,
  /// ncclSum; `send` == `recv` is in place, otherwise they must not overlap) on `stream`, a
  /// stream of device(rank). Returns without waiting (it may be captured into a CUDA graph).
  /// Every element's sum is computed once and copied to every rank (NCCL's ring and tree
  /// algorithms), so all ranks get the same bits; the order of the additions is NCCL's (rank
  /// order for 2 ranks, where a + b == b + a). Throws like the host forms.
  void queue_all_reduce_sum(int rank, const float* send, float* recv, size_t n, CUstream_st* stream);
  /// Queues ncclAllGather: device `recv` [n_ranks() * n] gets every rank's `send` [n] in rank
  /// order. `send` may be `recv + rank * n` (in place); otherwise they must not overlap.
  void queue_all_gather(int rank, const float* send, size_t n, float* recv, CUstream_st* stream);

  /// Waits until `stream` (a stream of device(rank)) has run everything queued on it, polling
  /// rather than blocking in cudaStreamSynchronize: a rank whose peer failed sees abort(), waits
  /// for its aborted NCCL kernels to return and throws std::runtime_error. Also throws it for a
  /// CUDA error of the stream.
  void synchronize(int rank, CUstream_st* stream);

  /// Marks the group failed and aborts every communicator (ncclCommAbort, on a helper thread:
  /// NCCL finishes an abort only once the CUDA graphs holding its collectives are destroyed,
  /// which the caller's own backend does later). Never blocks; idempotent.
  void abort() override;
  /// True after abort(): the backends' synchronize() and compute() throw.
  bool aborted() const;

 private:
  std::unique_ptr<NcclImpl> impl_;
};

}  // namespace minfer::cuda
