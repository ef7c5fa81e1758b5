/// @file quorum_group.h
/// @brief Communicators a chapter makes at run time for a group of ranks it
/// chose itself (chapter 16's quorums), and ULFM's revoke on them.
///
///     auto group = dpt::make_threads_group(3, 0.5);  // group[i]: member i's communicator
///     ...                                            // each member thread uses its own
///     dpt::revoke(*group[i], "rank 2 crashed");      // every member's call in flight throws
///
/// A group is a threads world of its own: it is not a sub-communicator of the
/// launch's world, so no rank outside it takes part in making it, and
/// revoking it stops only its members. Threads only: under mpirun a process
/// that dies ends the job (Open MPI 4.1 has no ULFM; scripts/dptrun restarts).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/comm/communicator.h"

namespace dpt {

/// The communicators of a new threads world of `size` ranks (index = member),
/// each to be used by its own member thread. Every wait is bounded by
/// `timeout_s` (> 0): a member that stops answering is a dpt::Timeout naming
/// it, and the group is then revoked for the others.
std::vector<std::unique_ptr<Communicator>> make_threads_group(int size, double timeout_s);

/// MPI_Comm_revoke: every call in flight on `comm`'s group, and every call
/// after, throws dpt::PeerFailed on each member ("stopped because rank R
/// failed: why", R = comm.rank()). Only for a group of make_threads_group.
void revoke(Communicator& comm, const std::string& why);

}  // namespace dpt
