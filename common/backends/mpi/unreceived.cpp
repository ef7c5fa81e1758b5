// unreceived.cpp — messages a rank sent that nobody received, found when the
// ranks end (as the threads backend finds them in its mailboxes).
//
// An eager send completes whether or not its receive is ever posted, so a
// program with one send too many ends without an error, and the message is
// dropped at MPI_Finalize. So each process counts the point-to-point
// messages it completed with every world rank, in the world's backend for
// the world and every group of it (count_message); finish() hands each peer
// the count of messages sent to it; a process that received fewer from a
// peer than that peer sent says so, and the lowest such rank's sentence
// becomes every rank's error. Collectives are not counted: every rank calls
// them alike, and the preflight checks that they do.
#include <cstring>
#include <sstream>

#include "library_check.h"
#include "mpi/mpi_backend.h"

namespace dpt {
namespace detail {
namespace mpi {

void MpiBackend::count_message(bool sent, int peer) {
  MpiBackend& world = world_ ? *world_ : *this;
  const int at = world_ranks_.empty() ? peer : world_ranks_[std::size_t(peer)];
  (sent ? world.sent_to_ : world.received_from_)[at].fetch_add(1);
}

std::string MpiBackend::unreceived_here(const std::vector<int64_t>& sent_to_me) const {
  for (int r = 0; r < size_; ++r) {
    const int64_t sent = sent_to_me[std::size_t(r)], got = received_from_[r].load();
    if (sent <= got) continue;
    std::ostringstream out;
    out << "rank " << r << " sent " << sent - got << " message(s) to rank " << rank_ << " that rank " << rank_
        << " never received (" << sent << " sent, " << got
        << " received, on the world and its groups): every send needs a matching recv";
    return out.str();
  }
  return "";
}

RankFailure MpiBackend::agree_on_unreceived(const std::string& mine) {
  int reporter = mine.empty() ? size_ : rank_;
  DPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &reporter, 1, MPI_INT, MPI_MIN, control_));
  if (reporter == size_) return {};
  std::vector<char> text(kAbortBytes, '\0');
  if (reporter == rank_) std::strncpy(text.data(), mine.c_str(), kAbortBytes - 1);
  DPT_MPI_CHECK(MPI_Bcast(text.data(), kAbortBytes, MPI_CHAR, reporter, control_));
  RankFailure failure;
  failure.rank = reporter;
  failure.message = text.data();
  failure.unreceived = true;
  return failure;
}

}  // namespace mpi
}  // namespace detail
}  // namespace dpt
