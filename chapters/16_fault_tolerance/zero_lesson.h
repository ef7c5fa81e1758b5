/// @file zero_lesson.h
/// @brief Chapter 16's --zero lesson (provided): a lost ZeRO-1 shard,
/// recovered from a sharded checkpoint or from a buddy copy, each run judged
/// and the two measured side by side (memory vs recovery time).
#pragma once

#include <memory>

#include "ch16_flags.h"
#include "dpt/lecture.h"
#include "lighthouse.h"
#include "zero_rank.h"

namespace dpt::ch16 {

/// What the rank threads of one policy's run share: rank 0 makes it.
struct ZeroShared {
  std::unique_ptr<Lighthouse> lighthouse;  ///< the run's quorum service
  std::unique_ptr<ZeroRecord> record;      ///< what its ranks leave for the verdicts
  ZeroSettings settings;                   ///< the policy, its interval, its scratch directory
  ZeroShared() = default;
  ZeroShared(const ZeroShared&) = delete;
  ZeroShared& operator=(const ZeroShared&) = delete;
  /// Removes a scratch directory a failed run left behind.
  ~ZeroShared();
};

/// Runs on every rank thread of the lecture: one --zero run per policy
/// --shard-recovery names (both: checkpoint, then buddy), then the table.
void zero_lesson(Lecture& lec, const Ch16Flags& f, ZeroShared& shared);

}  // namespace dpt::ch16
