// factory_nompi.cpp — the MPI factory when CMake found no MPI: it says so.
// (With MPI, factory_mpi.cpp is built instead; no #if anywhere else.)
#include "backends.h"

namespace dpt {

bool mpi_available() { return false; }

namespace detail {
std::unique_ptr<Communicator> make_mpi_communicator(double) {
  DPT_FAIL("--comm mpi: this dpt was built without MPI. Install Open MPI (e.g. apt install "
           "libopenmpi-dev openmpi-bin) and reconfigure (cmake --preset reference), or use "
           "--comm threads");
}
}  // namespace detail

}  // namespace dpt
