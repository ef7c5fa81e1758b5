// solutions/03_naive_dp/replicate.cpp — every replica starts as the master copy.
#include "ch03.h"

namespace dpt::ch03 {

void replicate_master(Communicator& comm, const MLP* master, MLP& replica) {
  if (comm.rank() == 0) copy_parameters(*master, replica);  // host → rank 0's device
  for (Tensor& p : replica.parameters()) comm.broadcast(p, 0);  // rank 0's bits → every replica
}

}  // namespace dpt::ch03
