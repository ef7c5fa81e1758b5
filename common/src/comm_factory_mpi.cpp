// comm_factory_mpi.cpp — the MPI factory when CMake found MPI. The backend
// itself is in comm_mpi.cpp; without MPI, comm_factory_nompi.cpp is built
// instead and says so. (The only place the two differ: no #ifdef elsewhere.)
#include "dpt/comm.h"

namespace dpt {

namespace detail {
std::unique_ptr<Communicator> new_mpi_communicator(double timeout_s);  // comm_mpi.cpp
}

bool mpi_available() { return true; }

std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  DPT_CHECK(timeout_s > 0, "the communication timeout must be > 0 s, got " << timeout_s);
  return detail::new_mpi_communicator(timeout_s);
}

}  // namespace dpt
