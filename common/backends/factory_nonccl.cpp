// factory_nonccl.cpp — the NCCL factory when the NCCL communicator is not
// built (CMake found no CUDA toolkit, no NCCL or no MPI): it says so. (With
// all three, factory_nccl.cpp is built instead; no #if anywhere else.)
#include "backends.h"
#include "dpt/gpu.h"

namespace dpt {
namespace detail {
std::unique_ptr<Communicator> make_nccl_communicator(double, int) {
  DPT_FAIL("--comm nccl: this dpt was built without the NCCL communicator (it needs the CUDA "
           "toolkit, NCCL and MPI when CMake runs; this build has CUDA: "
           << (gpu::built_with_cuda() ? "yes" : "no") << ", MPI: " << (mpi_available() ? "yes" : "no")
           << "). Install NCCL (e.g. apt install libnccl-dev, or NVIDIA's tarball beside CUDA) and "
              "reconfigure (cmake --preset reference), or use --comm mpi or --comm threads");
}
}  // namespace detail
}  // namespace dpt
