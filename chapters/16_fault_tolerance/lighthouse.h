/// @file lighthouse.h
/// @brief The quorum service (provided): every rank asks it, at the start of
/// every step, "who trains this step?"; it answers one membership and one step
/// to all of them, and a communicator of exactly those ranks.
///
/// torchft calls this service the lighthouse, TorchElastic the rendezvous:
/// here it is an object the rank threads share, standing in for a server
/// they would reach over the network. What it knows of failures is what such
/// a server would: a rank that left (its process ended: `leave`), a rank
/// that announced it will join at a step (`expect`), and a rank that did not
/// ask within the bounded wait (frozen, or too slow to be told apart): left
/// out, and named. A quorum keeps at least one rank of the last one (someone
/// must hold the run's state): without one it waits 5 waits, then is an error.
///
///     Quorum q = lighthouse.quorum(rank, step, committed);   // blocks, bounded
///     if (!q.member) ...                  // asked too late: join again
///     q.comm->all_reduce(...);            // a group of exactly q.members
///
/// What a round decides (who is in, from which step, who heals, the id) is
/// your hole, decide_quorum (ch16.h). The group changes when the membership
/// does, and also when a member reports the group broken (a collective that
/// threw): a revoked group is never used again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ch16.h"
#include "dpt/check.h"
#include "dpt/comm/communicator.h"

namespace dpt::ch16 {

/// What the lighthouse answered one rank for one step.
struct Quorum {
  bool member = false;           ///< false: this rank asked after the quorum formed without it
  int64_t id = 0;                ///< the quorum id (decide_quorum in ch16.h)
  std::vector<int> members;      ///< world ranks, ascending; index = rank in `comm`
  int index = -1;                ///< this rank's index in `members`
  Communicator* comm = nullptr;  ///< this rank's endpoint in the quorum's group
  int64_t step = 0;              ///< committed steps the quorum goes on from (decide_quorum)
  int source = -1;               ///< index of the member the others heal from (decide_quorum)
  std::vector<int> behind;       ///< indices of the members that heal from `source` (decide_quorum)
  bool new_group = false;        ///< the group was made for this step (a change, or the last one broke)
  std::string change;            ///< what changed since the last quorum, in words ("" if nothing)
};

/// "{0, 2, 3}": ranks as the lighthouse's history and the verdicts write them.
std::string rank_set_text(const std::vector<int>& ranks);

/// The first law of decide_quorum's contract (ch16.h) that `d` breaks for the
/// ranks that asked, `asked`: {the law in words, what was seen}, or {"", ""}.
/// (The id's law is judged over the whole run: broken_id_law.)
std::pair<std::string, std::string> broken_quorum_law(const std::map<int, int64_t>& asked, const QuorumDecision& d);

/// The id's law of decide_quorum's contract (ch16.h) over a run's quorums in
/// order (`quorums[0]` the one before the first judged), `when[i]` naming
/// quorums[i] ("step 12"): "" when it held, else what broke it.
std::string broken_id_law(const std::vector<QuorumDecision>& quorums, const std::vector<std::string>& when);

/// Thrown to every asker when a decision breaks a law (broken_quorum_law):
/// the run stops there, and the verdicts name the law.
class QuorumLawBroken : public Error {
 public:
  using Error::Error;
};

/// The quorum service of one run of `world` ranks.
class Lighthouse {
 public:
  /// `first` are the ranks in the run at step 0; `wait_s` bounds how long a
  /// quorum waits for a rank it expects; groups time out after `group_timeout_s`.
  Lighthouse(int world, const std::vector<int>& first, double wait_s, double group_timeout_s);
  /// Rank `rank` at the start of step slot `slot`, with `committed` steps
  /// behind it: waits until every expected rank has asked, or `wait_s` after
  /// the first one asked, then answers every asker the same quorum.
  Quorum quorum(int rank, int64_t slot, int64_t committed);
  /// Rank `rank` left the run (its process ended); `why` is kept for the log.
  void leave(int rank, const std::string& why);
  /// Rank `rank` will ask from slot `slot` on (a join, or a rejoin).
  void expect(int rank, int64_t slot);
  /// A member saw the group of slot `slot` break: the next quorum makes a new one.
  void broken(int64_t slot);
  /// Waits until the quorum of slot `slot - 1` has formed, or the run is over
  /// (a joining rank's process "starting" at its step). False if over.
  bool wait_for_slot(int64_t slot);
  /// A rank finished every slot: the run is over for ranks still waiting.
  void finished();
  /// One line per quorum that changed: "step 8: quorum 2 = {0, 1, 3}: rank 2 left (…)".
  std::vector<std::string> history() const;
  /// One round as the lighthouse decided it: who asked, with what, and the answer.
  struct RoundRecord {
    int64_t slot = 0;                ///< the step slot
    std::map<int, int64_t> asked;    ///< rank -> committed steps, the ranks that asked in time
    QuorumDecision decision;         ///< decide_quorum's answer (ch16.h)
  };
  /// Every round formed so far, in order (the verdicts judge them against their laws).
  std::vector<RoundRecord> decisions() const;

 private:
  struct Round {
    std::map<int, int64_t> asked;  // rank -> committed
    bool formed = false;
    std::chrono::steady_clock::time_point opened, deadline;
    std::vector<int> members;
    int64_t id = 0, step = 0;
    int source = -1;
    std::vector<int> behind;
    std::shared_ptr<std::vector<std::unique_ptr<Communicator>>> group;
    bool new_group = false;
    std::string change;
  };
  void form(int64_t slot, Round& round);  // mutex held

  const int world_;
  const double wait_s_, group_timeout_s_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::set<int> expected_;                 // ranks the next quorum waits for
  std::map<int, int64_t> joining_;         // rank -> slot it asks from
  std::map<int64_t, Round> rounds_;        // by slot
  std::vector<int> last_members_;
  int64_t last_id_ = 0, formed_up_to_ = -1;
  QuorumDecision last_decision_;           // what decide_quorum is given as `last`, whole
  bool broken_ = true;                     // no group yet
  bool over_ = false;
  std::shared_ptr<std::vector<std::unique_ptr<Communicator>>> group_;
  std::vector<std::shared_ptr<std::vector<std::unique_ptr<Communicator>>>> old_groups_;  // kept to the end
  std::string pending_change_;
  std::vector<std::string> history_;
  std::vector<RoundRecord> decisions_;
  std::exception_ptr error_;               // the decision threw: every asker rethrows it
};

}  // namespace dpt::ch16
