// exercises/13_pipeline_parallel/run_schedule.cpp — hole: run one stage's
// schedule, exchanging activations and gradients with the neighbouring
// stages. The contract is dpt::ch13::run_schedule in
// chapters/13_pipeline_parallel/ch13.h; hints in tiers are in
// docs/ch13_pipeline_parallel.md (§ Hints).
//
// Pointers:
//   - communicator.h: send, recv and sendrecv of Tensors; what a send does
//     above the eager limit.
//   - ch13.h: StageWork's four functions (buffers to receive into, forward,
//     backward); comm.rank() is this stage, comm.size() is P.
//   - The tests run every send as a rendezvous (--eager-limit 0) and stop a
//     wait after a short --comm-timeout, naming who waits for whom.
#include "ch13.h"

#include "dpt/check.h"

namespace dpt::ch13 {

void run_schedule(Communicator& comm, const std::vector<Op>& ops, const StageWork& work) {
  (void)comm, (void)ops, (void)work;
  throw NotImplemented("ch13: run_schedule — see exercises/13_pipeline_parallel/run_schedule.cpp");
}

}  // namespace dpt::ch13
