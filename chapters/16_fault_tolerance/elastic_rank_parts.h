/// @file elastic_rank_parts.h
/// @brief The parts of one rank of chapter 16 (provided; private to the
/// chapter): its state, the helpers on it, and the loop's class, whose
/// member functions live in elastic_rank.cpp (the slot, the transaction) and
/// heal_check.cpp (the heal, the checksum round).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ch16.h"
#include "dpt/nn.h"
#include "elastic_rank.h"

namespace dpt::ch16::parts {

/// The clock the loop measures with.
using SteadyClock = std::chrono::steady_clock;

/// Seconds from `t0` to now.
double seconds_since(SteadyClock::time_point t0);

/// What a process holds: lost with it on a crash.
struct RankState {
  MLP model;                    ///< the replica
  std::vector<Tensor> params;   ///< model.parameters(), handles
  std::vector<float> momentum;  ///< flat, Ψ
  int64_t committed = 0;        ///< committed steps behind it
  int64_t cursor = 0;           ///< position in the stream of samples (data_cursor.cpp)
};

/// A new process: the flags' model, zero momentum, nothing committed.
RankState fresh_state(const Options& o, Device& device);

/// The parameters, flat, on the host.
std::vector<float> flat_parameters(const RankState& st);

/// Writes `flat` into the parameters (on their device).
void set_flat_parameters(RankState& st, const std::vector<float>& flat);

/// FNV-1a over the parameters' bytes: equal replicas, equal sums.
uint64_t checksum_of(const std::vector<float>& flat);

/// Flips bit 22 of the first parameter: silent corruption, found by a later
/// checksum round (`--fail R@S:bitflip`).
void flip_a_bit(RankState& st);

/// One step's share-out, as every member computes it.
struct StepPlan {
  int64_t global = 0;          ///< samples in the step: b·N0 (--keep global) or b·n (--keep per-rank)
  float lr = 0;                ///< the rate: η, or η·n/N0 under --keep per-rank (the linear scaling rule)
  StepSamples share;           ///< assign_samples' answer (your hole), one shard per member
  std::vector<int64_t> batch;  ///< the shards joined in member order: the ledger's entry
};

/// The step of `n` members at `cursor` under `s`'s batch policy, over a data
/// set of `samples`: calls assign_samples and checks it gave one shard per member.
StepPlan plan_step(const Options& o, const ElasticSettings& s, int64_t cursor, int n, int64_t samples);

/// This member's part of a step's gradient, flat: the mean gradient over
/// `shard` (global sample indices) weighted by shard.size() / `global`, so
/// that the members' sum is the mean over the step's `global` samples.
/// `fine` is false when an element is not finite (the member's vote).
std::vector<float> member_gradient(RankState& st, const Dataset& data, const std::vector<int64_t>& shard,
                                   int64_t global, Device& device, bool& fine);

/// The checksum round's verdict on `sums` (one per member; `voting[i]` false:
/// member i abstains): the indices whose sum is not the voters' strict
/// majority's, or every voter's when there is no strict majority (`tie`:
/// two replicas can tell that they differ, not who is wrong). Empty: all agree.
std::vector<int> checksum_dissenters(const std::vector<uint64_t>& sums, const std::vector<bool>& voting, bool& tie);

/// `st` as the heal's contract holds a member (ch16.h), with the member's
/// `last_grad`, `world_rank` and `step_seconds`.
MemberState member_state(const RankState& st, const std::vector<float>& last_grad, int world_rank,
                         double step_seconds);

/// Makes `s` the state of `st` and `last_grad`: the member becomes `s`, but
/// who it is and its timing, which stay its own.
void take_member_state(RankState& st, std::vector<float>& last_grad, const MemberState& s);

/// The last state every member agreed on (a checksum round): where a rollback goes.
struct Snapshot {
  bool valid = false;  ///< false until the first agreeing round
  MemberState held;    ///< the member then, whole (member_state)
};

/// One rank's loop over the step slots (elastic_rank.h's run_elastic_rank).
class ElasticRank {
 public:
  /// Rank `rank`'s loop, as run_elastic_rank's arguments say; a fresh state.
  ElasticRank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
              const ElasticSettings& s, Lighthouse& lh, RunRecord& record)
      : rank_(rank), device_(device), o_(o), data_(data), plan_(plan), s_(s), lh_(lh), record_(record),
        st_(fresh_state(o, device)) {}

  /// Every slot of the run, as elastic_rank.cpp's comment says.
  void run();

 private:
  // A crash or a freeze: this process is gone. True when a join restarts it at *slot.
  bool out_until_join(int64_t& slot, bool crashed, const std::string& why);
  void heal(const Quorum& q, int64_t slot);
  HealEntry& heal_entry(int64_t slot, int joiner);
  void check(const Quorum& q, int64_t slot, bool behind);
  void final_check();
  bool step(const Quorum& q, int64_t slot, bool crash_here);
  void drop(int64_t slot, const std::string& what);
  void keep(Replica& replica);  // what the step left in the replica becomes this rank's state

  const int rank_;
  Device& device_;
  const Options& o_;
  const Dataset& data_;
  const FaultPlan& plan_;
  const ElasticSettings& s_;
  Lighthouse& lh_;
  RunRecord& record_;
  RankState st_;
  Snapshot snap_;
  std::vector<float> last_grad_;    // the last step's summed gradient (empty in a new process)
  double last_step_seconds_ = 0;    // how long that step took here
  double slow_ = 1;
  std::vector<int> members_;  // the last quorum's, for messages
};

}  // namespace dpt::ch16::parts
