// backends.h — how launch() gets a communicator: one factory per backend
// (threads/, mpi/, nccl/; factory_*.cpp say which this build has). Private to
// libdpt: the backends and the harness's launch include it, the core never.
#pragma once

#include <memory>
#include <vector>

#include "comm/backend.h"

namespace dpt {
namespace detail {

/// Options of a threads world (launch.h's --comm-timeout, --link, --eager-limit).
struct ThreadsWorldOptions {
  double timeout_s = 30;        ///< > 0: every wait's bound
  LinkModel link{};             ///< the simulated network
  int64_t eager_limit_bytes = 65536;  ///< sends above it wait for their receive (>= 0)
};

/// The communicators of one threads world of `size` ranks, index = rank. Each
/// is used by its own rank thread.
std::vector<std::unique_ptr<Communicator>> make_threads_world(int size,
                                                              const ThreadsWorldOptions& options);

/// Wraps a backend that moves host memory only (MPI, which may not be
/// CUDA-aware) so GPU buffers reach it through host copies (host_staging.cpp).
/// `size` is the number of ranks.
std::unique_ptr<Backend> stage_gpu_buffers(std::unique_ptr<Backend> inner, int size);

/// This process's MPI communicator (initialises MPI on first use, with
/// MPI_THREAD_MULTIPLE when the library offers it; finalises at exit).
/// Collective over all processes. Throws dpt::Error without MPI.
std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s);

/// This process's NCCL communicator on GPU `local_rank % GPUs`, bootstrapped
/// over MPI (factory_nccl.cpp, nccl/). Collective over all processes. Throws
/// dpt::Error, saying how to get it, in a build without NCCL or with no GPU.
std::unique_ptr<Communicator> make_nccl_communicator(double timeout_s, int local_rank);

}  // namespace detail
}  // namespace dpt
