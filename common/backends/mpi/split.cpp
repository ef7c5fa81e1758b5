// split.cpp — the MPI backend's sub-communicators (Communicator::split).
//
// MPI_Comm_split on data_ with the same (color, key) makes the group in the
// order the core computed (MPI's rule is the same: key, then rank). The new
// backend has no control_ of its own: its fail() and stop_reason() are its
// world's, so an abort message from any process of the world stops a wait in
// any group, and the PeerFailed names the world rank. split_group makes the
// same group as an MpiBackend: the NCCL backend's groups use it as their
// control plane (nccl/split.cpp).
//
// What is not covered: MPI_Comm_split itself blocks without a timeout. The
// core's all_gather_bytes before it (a polling wait, with the timeout and the
// failure protocol) has seen every rank arrive, so it only hangs if a process
// dies between the two calls. Also left out: a sub-communicator used after
// its world communicator is destroyed (world_ would dangle), or after MPI is
// finalised at exit (its MPI_Comm_free would fail).
#include <sstream>

#include "library_check.h"
#include "mpi/mpi_backend.h"

namespace dpt {
namespace detail {
namespace mpi {

MpiBackend::MpiBackend(MPI_Comm data, MpiBackend* world, std::vector<int> world_ranks, double timeout_s)
    : timeout_s_(timeout_s), data_(data), control_(MPI_COMM_NULL), world_(world),
      world_ranks_(std::move(world_ranks)) {
  MPI_Comm_rank(data_, &rank_);
  MPI_Comm_size(data_, &size_);
}

SplitBackend MpiBackend::split(int color, int key, const std::vector<int>& members) {
  std::unique_ptr<MpiBackend> made = split_group(color, key, members);
  const int rank = made->rank(), size = made->size();
  return {std::move(made), TrafficLog(size).view(rank)};
}

std::unique_ptr<MpiBackend> MpiBackend::split_group(int color, int key, const std::vector<int>& members) {
  MPI_Comm group;
  DPT_MPI_CHECK(MPI_Comm_split(data_, color, key, &group));
  DPT_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  std::vector<int> world_ranks;
  for (int r : members) world_ranks.push_back(world_ranks_.empty() ? r : world_ranks_[r]);
  auto made = std::make_unique<MpiBackend>(group, world_ ? world_ : this, std::move(world_ranks), timeout_s_);
  const int rank = made->rank(), size = made->size();
  DPT_CHECK(size == int(members.size()) && members[rank] == rank_,
            "MPI_Comm_split made a group of " << size << " ranks with this rank at " << rank
                                              << ", the core expected " << members.size() << " ranks");
  return made;
}

std::string MpiBackend::numbering() const {
  if (world_ranks_.empty()) return "";
  std::ostringstream out;
  out << "; in this sub-communicator ranks 0.." << size_ - 1 << " are world ranks ";
  for (int r = 0; r < size_; ++r) out << (r ? ", " : "") << world_ranks_[r];
  return out.str();
}

}  // namespace mpi
}  // namespace detail
}  // namespace dpt
