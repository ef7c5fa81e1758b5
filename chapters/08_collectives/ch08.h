/// @file ch08.h
/// @brief Chapter 08's algorithms and exercises: five all-reduces built only
/// from send / recv / sendrecv, specified here once. Your holes are
/// `halving_reduce_scatter`, `doubling_all_gather` and
/// `halving_doubling_all_reduce` (exercises/08_collectives/halving_doubling.cpp)
/// and `two_level_all_reduce` (exercises/08_collectives/two_level.cpp). The
/// hints are in the chapter page (\ref ch08_hints), one tier at a time.
/// `ctest --preset student -L ch08` checks them against a serial sum and
/// their messages against the contracts below.
///
/// Every algorithm here sums (ReduceOp::Sum) a vector of `count` floats that
/// every rank passes with the same `count`; afterwards every rank holds the
/// elementwise sum of all the ranks' vectors, each rank's contribution counted
/// exactly once. Every rank runs the algorithm at once and a send may wait
/// until its receive is posted (communicator.h, "rendezvous"): no algorithm
/// may deadlock under that rule. Add received floats with `dpt::add_floats`
/// into scratch made with `dpt::Floats` (dpt/floats.h), as in chapter 04.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/range.h"

namespace dpt::ch08 {

// ----------------------------------------------------------------------------
// teams: the ranks an algorithm runs on

/// A group of the world's ranks, addressed by index 0 … size()−1: the whole
/// world, one node's ranks, or one rank of every node. Every algorithm below
/// runs on a Team, so it runs unchanged on part of the world. Messages go
/// through the world's communicator, under the members' world ranks (the
/// traffic log shows world ranks). (Provided, not a hole.)
class Team {
 public:
  /// The whole world: index i is world rank i.
  explicit Team(Communicator& comm);
  /// The world ranks `members`, in this order (the same list on every member);
  /// this rank must be one of them. Throws dpt::Error otherwise.
  Team(Communicator& comm, std::vector<int> members);
  /// This rank's index in the team.
  int rank() const { return index_; }
  /// Number of members.
  int size() const { return int(members_.size()); }
  /// The world rank of member `index`.
  int world_rank(int index) const;
  /// The team of this team's members `indices` (this rank among them), indexed
  /// in the order given.
  Team sub(const std::vector<int>& indices) const;
  /// As Communicator's, with peers given as team indices.
  void send(const float* data, int64_t count, int to) const;
  /// As Communicator's, with peers given as team indices.
  void recv(float* data, int64_t count, int from) const;
  /// As Communicator's, with peers given as team indices.
  void sendrecv(const float* send_buf, int64_t send_count, int to, float* recv_buf, int64_t recv_count,
                int from) const;
  /// The world's communicator.
  Communicator& comm() const { return comm_; }

 private:
  Communicator& comm_;
  std::vector<int> members_;
  int index_ = -1;
};

/// Blocks [first, last) of `count` elements cut into `blocks` near-equal
/// blocks (block i is chapter 04's `ring_chunk(count, blocks, i)`): one
/// contiguous range. `block_range(count, p, i, i + 1)` is block i.
Range block_range(int64_t count, int blocks, int first, int last);

/// The largest power of two <= n (n >= 1).
int power_of_two_below(int n);

// ----------------------------------------------------------------------------
// provided algorithms: one file each in chapters/08_collectives/

/// Chapter 04's ring (`ch04::ring_all_reduce`) on the whole world:
/// 2(n−1) steps, each one chunk to the right neighbour. `team` must be the
/// whole world.
void ring_all_reduce(const Team& team, float* data, int64_t count);

/// Recursive doubling: every step exchanges the whole vector with one partner
/// and adds; after log2 n steps everyone has the sum. A non-power-of-two team
/// folds its extra ranks in first and out last, as MPICH does (even ranks
/// below 2·(n − p) hand their vector to the odd one above them).
void recursive_doubling_all_reduce(const Team& team, float* data, int64_t count);

/// Binomial tree: reduce to rank 0 in ceil(log2 n) steps (each step, half of
/// the ranks still holding a partial sum send it to a rank that adds it), then
/// broadcast from rank 0 down the same tree.
void tree_all_reduce(const Team& team, float* data, int64_t count);

/// Reduce-scatter among a team, pairwise: in step s = 1 … n−1 member i sends
/// its block (i+s) mod n to member (i+s) mod n and adds what member (i−s) mod n
/// sends of block i. Postcondition: member i's block i (block_range(count, n,
/// i, i+1)) holds that block's sum over the team; other blocks: whatever.
void pairwise_reduce_scatter(const Team& team, float* data, int64_t count);

/// All-gather among a team, pairwise: on entry member i's block i is final;
/// afterwards every member holds every member's final block. Copies, never adds.
void pairwise_all_gather(const Team& team, float* data, int64_t count);

// ----------------------------------------------------------------------------
// your holes: halving and doubling (Rabenseifner), and the two-level all-reduce

/// Reduce-scatter by recursive halving on a team whose size p is a power of
/// two. On entry `data` holds this rank's vector, cut into p blocks
/// (block_range(count, p, i, i + 1)).
///
/// Postcondition: member r's block r holds the sum of block r over the p
/// members, each contribution counted exactly once. Other blocks: whatever.
///
/// Communication: log2 p steps. In each step a member exchanges with exactly
/// one partner (a different one each step) one sendrecv, and the range of
/// blocks it is still responsible for halves: it sends the half it gives up
/// and receives the partner's contribution to the half it keeps. So a member
/// sends (p−1)/p of the vector in all.
/// (Hole: exercises/08_collectives/halving_doubling.cpp.)
void halving_reduce_scatter(const Team& team, float* data, int64_t count);

/// All-gather by recursive doubling on a power-of-two team: the mirror image
/// of halving_reduce_scatter. On entry member r's block r is final.
///
/// Postcondition: every member holds every member's final block, bit for bit.
///
/// Communication: log2 p steps, one sendrecv with one partner each, and the
/// range a member holds final doubles at every step (it sends all of it and
/// receives as much). Every pair that talks here also talked in
/// halving_reduce_scatter.
/// (Hole: exercises/08_collectives/halving_doubling.cpp.)
void doubling_all_gather(const Team& team, float* data, int64_t count);

/// Rabenseifner's all-reduce on a team of any size n >= 1: a reduce-scatter
/// by halving, then an all-gather by doubling, among the first p members
/// (p = power_of_two_below(n)), with the n − p extra members folded in before
/// and out after.
///
/// Postcondition: every member holds the sum over all n members.
///
/// Communication: members p … n−1 ("extra") take no part in the two phases.
/// Each extra member sends its vector once, to one of the first p members,
/// and receives the result once, from the same member; no member of the first
/// p folds in more than one extra. The first p members talk among themselves
/// only as the two phases do.
/// (Hole: exercises/08_collectives/halving_doubling.cpp.)
void halving_doubling_all_reduce(const Team& team, float* data, int64_t count);

/// The two-level all-reduce on `nodes` nodes of G = comm.size() / nodes ranks
/// each (comm.size() a multiple of `nodes`): world rank r lives on node
/// r / G as local rank r mod G. Links inside a node are fast, links between
/// nodes slow.
///
/// Postcondition: every rank holds the sum over all ranks.
///
/// Communication: a rank talks across nodes only with ranks of its own local
/// index, and sends at most 1/G of what one halving_doubling_all_reduce of the
/// whole vector among `nodes` ranks would send across. Inside its node a rank
/// sends exactly what a bandwidth-optimal all-reduce among G ranks sends,
/// 2(G−1)/G of the vector. Build it from the team algorithms above.
/// (Hole: exercises/08_collectives/two_level.cpp.)
void two_level_all_reduce(Communicator& comm, float* data, int64_t count, int nodes);

}  // namespace dpt::ch08
