/// @file ch16.h
/// @brief Chapter 16's holes, each specified once by its laws: the
/// lighthouse's agreement on membership (exercises/16_fault_tolerance/quorum.cpp),
/// the share-out of a step's samples (samples.cpp), the end of a step as a
/// transaction across the quorum's group (commit.cpp), and the heal of the
/// members behind from a live peer (heal.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "dpt/comm/communicator.h"

namespace dpt::ch16 {

/// The lighthouse's answer for one step slot, the same to every member
/// (lighthouse.h's Quorum carries it, with the group's communicator).
struct QuorumDecision {
  std::vector<int> members;  ///< world ranks, ascending
  int64_t id = 0;            ///< the quorum id
  int64_t step = 0;          ///< the committed steps the quorum goes on from
  int source = -1;           ///< index in `members` of the member the others heal from (set even when none is behind)
  std::vector<int> behind;   ///< indices in `members` of the members that heal from `source`, ascending
};

/// The lighthouse's decision when a round closes. `asked` is all the
/// lighthouse knows of who is alive: each rank that asked in time, and the
/// committed steps it holds (never empty: the lighthouse waits for someone).
/// `last` is the last quorum's decision, whole (before the first: the run's
/// first ranks, id 0, step 0, no source). The members at `behind` heal from
/// the member at `source` (heal, below); every other member keeps its own state.
///
/// Postcondition — what the run needs of a quorum:
///  - it is as large as it can be, with no rank in it that may be dead (to
///    the lighthouse a frozen rank looks just like a dead one);
///  - nothing committed is lost: no rank that asked goes back from the
///    committed steps it holds;
///  - after the heal every member holds the same state, `step` committed
///    steps, and only members that lack it receive anything;
///  - a message stamped with a quorum's id is never taken for another
///    quorum's: the members of `last`, again, are the same quorum and keep its
///    id; any other membership is a new quorum, whose id names no quorum
///    before it in the run.
QuorumDecision decide_quorum(const std::map<int, int64_t>& asked, const QuorumDecision& last);

/// One committed step's share-out of samples.
struct StepSamples {
  std::vector<std::vector<int64_t>> shards;  ///< shards[i]: the global sample indices member i computes
  int64_t next_cursor = 0;                   ///< the cursor the run holds once this step commits
};

/// The samples of a step computed by `members` members, at the run's cursor
/// `cursor`, with `global` samples in the step (the batch policy's choice:
/// --keep global or per-rank), drawn from the run's stream over a data set of
/// `samples` (sample_at in elastic_rank.h, seeded with `seed`).
///
/// Postcondition:
///  - `members` shards, their sizes differing by at most one, `global` in all;
///  - the step's samples are the stream's, from where `cursor` stands;
///  - across any run of committed steps, each starting at the last one's
///    `next_cursor` (the first at 0), whatever each step's `members` and
///    `global` — shrinks, joins, both policies —, every sample of every epoch
///    is consumed exactly once, epoch after epoch;
///  - the same arguments give the same answer (every member computes it).
StepSamples assign_samples(int64_t cursor, int members, int64_t global, int64_t samples, uint64_t seed);

/// What one member's step changes, flat: Ψ parameters and their Ψ momentum buffers.
struct Replica {
  std::vector<float> params;    ///< the parameters, flat
  std::vector<float> momentum;  ///< momentum SGD's buffers, same length
};

/// Momentum SGD (μ = 0.9) with the summed gradient `grad`: v ← μ·v + grad,
/// w ← w − lr·v, elementwise (provided).
void apply_momentum(Replica& replica, const std::vector<float>& grad, float lr);

/// The end of one step on one member of `group`, once `grad` holds the
/// gradient summed over every member; `fine` says whether this member can
/// stand behind the step (its own gradient was finite).
///
/// Postcondition — the step is a transaction over `group`:
///  - every member passed `fine` = true: returns true on every member, each
///    having applied `grad` to its replica once (apply_momentum);
///  - some member passed false: returns false on every member, no replica changed;
///  - some member never reaches this call (it crashed; the group is revoked,
///    or a call times out): the group's exception (PeerFailed, Timeout) passes
///    through on the others, and no replica has changed.
/// Each member calls it once per step, the same on every member.
/// Under ZeRO-1 (--zero) `replica` is the member's shard (its slice of the
/// parameters, its momentum shard) and `grad` the same slice of the sum: the
/// same decision, each member applying only what it owns.
bool commit_step(Communicator& group, Replica& replica, const std::vector<float>& grad, float lr, bool fine);

/// Everything one member of a quorum holds when a heal begins.
struct MemberState {
  Replica replica;             ///< the parameters and their momentum buffers
  int64_t committed = 0;       ///< the committed steps behind it, as the lighthouse asks for them
  int64_t cursor = 0;          ///< its position in the stream of samples (assign_samples' `cursor`)
  std::vector<float> grad;     ///< the summed gradient of the last step it took (empty before its first)
  int world_rank = -1;         ///< who this member is: its rank in the launch's world
  double step_seconds = 0;     ///< how long its last step took here
};

/// The heal, called by every member of `group` with the same `source` and
/// `behind` (the quorum's decision: indices in `group`, `behind` ascending
/// and without `source`); `me` is the calling member's own state. A member
/// in `behind` holds a replica of the source's shape with any values, and
/// any other fields (a new process, or a stale member).
///
/// Postcondition:
///  - each member in `behind` is then a replica like the source: from its
///    next step on, nothing the run observes of the two tells them apart,
///    bit for bit — except what is each member's own (below);
///  - the source, and every member neither source nor behind, ends with `me`
///    unchanged and receives nothing;
///  - the bytes that reach each member behind are the least that give it the
///    first law: nothing crosses the wire that the member can do without;
///  - every member keeps what is its own.
/// A member that fails mid-heal: the group's exception (PeerFailed, Timeout)
/// passes through on the others.
void heal(Communicator& group, int source, const std::vector<int>& behind, MemberState& me);

}  // namespace dpt::ch16
