// solutions/09_parameter_server/worker.cpp — a worker's push and pull
// (spec: ch09.h). Every server gets its own slice of the gradient first; only
// then does the worker wait for answers. Waiting for server 0's answer before
// pushing to server 1 would work too, but serialises the servers; pulling
// before pushing deadlocks (the server answers only a push).
#include "ch09.h"

namespace dpt::ch09 {

void push_and_pull(Communicator& comm, const Roles& roles, const std::vector<float>& grad, std::vector<float>& params) {
  for (int s = 0; s < roles.servers; ++s) {
    Range r = roles.shard(s);
    comm.send(grad.data() + r.begin, r.size(), roles.server_rank(s), kPushTag);
  }
  for (int s = 0; s < roles.servers; ++s) {
    Range r = roles.shard(s);
    comm.recv(params.data() + r.begin, r.size(), roles.server_rank(s), kPullTag);
  }
}

}  // namespace dpt::ch09
