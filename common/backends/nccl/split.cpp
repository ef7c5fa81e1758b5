// split.cpp — the NCCL backend's sub-communicators (Communicator::split).
//
// A group is two communicators made together, each collective over every
// rank of this one: its control plane, an MPI group (MpiBackend::split_group,
// whose failure protocol is the world's: an abort message from any process
// stops a wait in any group), and its NCCL communicator, from ncclCommSplit
// on this one. The core has gathered every rank's (color, key) and ordered
// the members; NCCL gets this rank's place in that order as its key, unique
// within a color, so NCCL numbers the group as the core and MPI do whatever
// NCCL does with equal keys.
//
// ncclCommSplit on a non-blocking communicator returns at once: the split
// runs on a thread of NCCL's, which writes the new handle when it is done;
// until then this communicator's state reads ncclInProgress. So the wait
// polls this communicator's state, then the new one's, with the timeout and
// the failure protocol (MpiBackend::wait_for), as the world's start does. A
// split that fails or times out aborts this communicator (which also stops
// NCCL's thread and waits for it) and then the new one, if it was made:
// neither can be used after that, and the program is expected to end.
//
// The group is an NcclBackend like the world's, on the same GPU, with its
// own stream, ended the same way (finalize, then destroy; abort after a
// failure). It must be destroyed before this one: its control plane reports
// failures through this one's world.
//
// NCCL_SPLIT_NOCOLOR is never passed: the core refuses a negative color, so
// every rank joins a group.
#include "library_check.h"
#include "nccl/nccl_backend.h"

namespace dpt {
namespace detail {
namespace nccl {

SplitBackend NcclBackend::split(int color, int key, const std::vector<int>& members) {
  DPT_CHECK(!aborted_, "the NCCL communicator was aborted after an earlier failure or timeout; "
                       "it cannot be split");
  std::unique_ptr<mpi::MpiBackend> control = control_->split_group(color, key, members);
  const int rank = control->rank(), size = control->size(), here = control_->rank();
  DPT_CUDA_CHECK(cudaSetDevice(device_));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // as the world's: every call on the group is polled (stream_wait.cpp)
  ncclComm_t group = nullptr;  // written by NCCL's thread once the split is done
  auto give_up = [&] {
    abort();  // this communicator, and NCCL's split thread with it
    if (group) ncclCommAbort(group);
    group = nullptr;
  };
  auto done = [&] {
    ncclResult_t state = ncclSuccess;
    DPT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclInProgress) return false;
    DPT_CHECK(state == ncclSuccess, "ncclCommSplit failed on rank " << here << ": " << ncclGetErrorString(state));
    DPT_CHECK(group != nullptr, "ncclCommSplit returned no communicator on rank " << here);
    DPT_NCCL_CHECK(ncclCommGetAsyncError(group, &state));
    if (state == ncclInProgress) return false;
    DPT_CHECK(state == ncclSuccess, "the communicator ncclCommSplit made failed on rank "
                                        << here << ": " << ncclGetErrorString(state));
    return true;
  };
  std::unique_ptr<NcclBackend> made;
  try {
    issued(ncclCommSplit(comm_, color, rank, &group, &config), "ncclCommSplit");
    control_->wait_for("ncclCommSplit", -1, 0, 0, done, give_up);
    int nccl_rank = -1, nccl_size = 0;
    DPT_NCCL_CHECK(ncclCommUserRank(group, &nccl_rank));
    DPT_NCCL_CHECK(ncclCommCount(group, &nccl_size));
    DPT_CHECK(nccl_rank == rank && nccl_size == size,
              "ncclCommSplit made a group of " << nccl_size << " ranks with rank " << here << " at " << nccl_rank
                                               << ", the core expected " << size << " ranks with it at " << rank);
    made = std::make_unique<NcclBackend>(std::move(control), group, device_, timeout_s_);
  } catch (...) {  // the new communicator is not a backend's yet
    give_up();
    throw;
  }
  return {std::move(made), TrafficLog(size).view(rank)};
}

}  // namespace nccl
}  // namespace detail
}  // namespace dpt
