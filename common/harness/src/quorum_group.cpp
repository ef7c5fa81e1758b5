// quorum_group.cpp — run-time groups of the threads backend and their revoke
// (dpt/quorum_group.h): a fresh threads world, and the backend's own failure
// path (World::fail) used as ULFM's revoke.
#include "dpt/quorum_group.h"

#include "backends.h"
#include "comm/backend.h"

namespace dpt {

std::vector<std::unique_ptr<Communicator>> make_threads_group(int size, double timeout_s) {
  detail::ThreadsWorldOptions options;
  options.timeout_s = timeout_s;
  return detail::make_threads_world(size, options);
}

void revoke(Communicator& comm, const std::string& why) {
  DPT_CHECK(comm.backend() == "threads", "revoke: only a threads group can be revoked, not a " << comm.backend()
                                                                                               << " communicator");
  detail::CommAccess::fail(comm, why, true);
}

}  // namespace dpt
