// mpi_world.h — what the tests run under mpirun share: launch options for the
// MPI communicator, and the number of processes mpirun started.
#pragma once

#include <cstdlib>

#include "dpt/launch.h"

namespace dpt_test {

/// Launch options for `--comm mpi` with a bounded wait (seconds).
inline dpt::LaunchOptions mpi(double timeout_s = 20) {
  dpt::LaunchOptions o;
  o.comm = "mpi";
  o.timeout_s = timeout_s;
  return o;
}

/// Processes in this mpirun job (1 when not started by Open MPI's mpirun).
inline int world_size() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size ? std::atoi(size) : 1;
}

}  // namespace dpt_test
