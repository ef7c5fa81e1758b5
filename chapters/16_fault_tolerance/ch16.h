/// @file ch16.h
/// @brief Chapter 16's holes, each specified once by its laws: the
/// lighthouse's agreement on membership (exercises/16_fault_tolerance/quorum.cpp),
/// the share-out of a step's samples (samples.cpp), and the end of a step as a
/// transaction across the quorum's group (commit.cpp).
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
  int source = -1;           ///< index in `members` of the member the others heal from
  std::vector<int> behind;   ///< indices in `members` of the members that heal from `source`, ascending
};

/// The lighthouse's decision when a round closes: `asked` maps each rank that
/// asked in time to the committed steps it holds; `last` is the last quorum's
/// decision (before the first: the run's first ranks, id 0).
///
/// Postcondition — the laws a quorum keeps:
///  - who is in: a rank that did not ask is not a member (it may be frozen);
///    a rank that asked is;
///  - no member goes back in step: no member holds more committed steps than
///    `step`, and the member at `source` holds exactly `step` (someone holds
///    the newest state, and the others can take it from there);
///  - `behind` lists exactly the members that hold fewer than `step`;
///  - the id changes exactly when the membership does: `last.id` when
///    `members` equals `last.members`, else an id above every id before it.
/// `asked` is never empty (the lighthouse waits for someone).
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

}  // namespace dpt::ch16
