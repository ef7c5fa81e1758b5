// factory_mpi.cpp — the MPI factory when CMake found MPI. The backend itself
// is in mpi/; without MPI, factory_nompi.cpp is built instead and says so.
// (With CMake, the only place the two builds differ: no #if anywhere else.)
#include "backends.h"

namespace dpt {

bool mpi_available() { return true; }

namespace detail {
std::unique_ptr<Communicator> new_mpi_communicator(double timeout_s);  // mpi/runtime.cpp

std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  DPT_CHECK(timeout_s > 0, "the communication timeout must be > 0 s, got " << timeout_s);
  return new_mpi_communicator(timeout_s);
}
}  // namespace detail

}  // namespace dpt
