// factory_nccl.cpp — the NCCL factory when CMake found CUDA, NCCL and MPI.
// The backend itself is in nccl/; otherwise factory_nonccl.cpp is built
// instead and says so. (No #if anywhere else.)
#include "backends.h"
#include "dpt/gpu.h"

namespace dpt {
namespace detail {
std::unique_ptr<Communicator> new_nccl_communicator(double timeout_s, int device);  // nccl/bootstrap.cpp

std::unique_ptr<Communicator> make_nccl_communicator(double timeout_s, int local_rank) {
  DPT_CHECK(timeout_s > 0, "the communication timeout must be > 0 s, got " << timeout_s);
  // Every process sees the same answer here, so all stop before MPI starts.
  std::string reason = gpu::unavailable_reason();
  DPT_CHECK(reason.empty(), "--comm nccl needs one CUDA GPU per rank, and " << reason
                                << " (use --comm mpi or --comm threads)");
  int device = local_rank % gpu::device_count();
  gpu::set_current_device(device);  // before MPI starts: a CUDA-aware MPI uses the current GPU
  return new_nccl_communicator(timeout_s, device);
}
}  // namespace detail
}  // namespace dpt
