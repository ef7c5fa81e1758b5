/// @file run_record.h
/// @brief What the ranks of chapter 16 leave for the verdicts (provided): the
/// ledger of committed steps, the heals, the checksum rounds, the dropped
/// steps and every last member's weights. Shared by the rank threads, under
/// one mutex; read by rank 0 once every rank is done.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace dpt::ch16 {

/// One committed step: which global samples it consumed, under which quorum.
struct LedgerEntry {
  int64_t slot = 0;              ///< the loop's step slot it committed in
  int64_t quorum_id = 0;         ///< the quorum that committed it
  int members = 0;               ///< how many ranks computed it
  float lr = 0;                  ///< the learning rate it was applied with
  std::vector<int64_t> samples;  ///< global sample indices, in the global batch's order
  std::vector<int> ranks;        ///< the quorum's world ranks
};

/// One heal: a rank behind became a replica of a live peer.
struct HealEntry {
  int64_t slot = 0;            ///< the slot it happened in
  int joiner = 0;              ///< the world rank that received
  int source = 0;              ///< the world rank that sent
  int64_t bytes = 0;           ///< point-to-point bytes the source's traffic log counted to the joiner
  int64_t collective = 0;      ///< payload the joiner passed to collectives during the heal
  double seconds = 0;          ///< measured on the joiner
  std::vector<float> sent;      ///< the source's parameters as it sent them
  std::vector<float> received;  ///< the joiner's parameters after the heal
};

/// One checksum round that disagreed.
struct MismatchEntry {
  int64_t slot = 0;              ///< the slot whose check disagreed
  std::vector<int> named;        ///< world ranks whose checksum was not the majority's
  int64_t rolled_back_to = 0;    ///< committed steps after the rollback
  int64_t steps_undone = 0;      ///< committed steps the rollback undid
  bool tie = false;              ///< no strict majority: `named` holds every voter
};

/// Everything the verdicts read.
struct RunRecord {
  std::mutex mutex;                        ///< guards every field
  std::vector<LedgerEntry> ledger;         ///< committed steps, in commit order
  std::vector<HealEntry> heals;            ///< every heal
  std::vector<MismatchEntry> mismatches;   ///< every checksum round that disagreed
  std::vector<std::string> dropped;           ///< "step 8: stopped because rank 2 failed: …"
  std::vector<std::vector<float>> finals;     ///< by world rank: weights at the end (empty: not a member)
  std::vector<double> finish_seconds;         ///< by world rank: wall time its loop took
  int64_t checks = 0;                          ///< checksum rounds that agreed
  /// Threads: by slot, each member's shard as that member drew it (index in
  /// the quorum), so the exactly-once verdict counts what was computed, not
  /// one member's view of the share-out (a member at another cursor draws
  /// other samples).
  std::map<int64_t, std::vector<std::vector<int64_t>>> drawn;
};

}  // namespace dpt::ch16
