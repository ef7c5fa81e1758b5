// exercises/09_parameter_server/worker.cpp — hole: a worker's push and pull.
//
// The contract is in chapters/09_parameter_server/ch09.h (push_and_pull).
// Which part of the gradient goes to which server, and in which order to send
// and wait, are yours to work out.
//
// What you have: roles.shard(s), roles.server_rank(s), the tags kPushTag and
// kPullTag, comm.send / comm.recv (communicator.h).
#include "ch09.h"

#include "dpt/check.h"

namespace dpt::ch09 {

void push_and_pull(Communicator& comm, const Roles& roles, const std::vector<float>& grad, std::vector<float>& params) {
  (void)comm, (void)roles, (void)grad, (void)params;
  throw NotImplemented("ch09: push_and_pull — see exercises/09_parameter_server/worker.cpp");
}

}  // namespace dpt::ch09
