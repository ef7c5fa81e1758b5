/// @file zero_checks.h
/// @brief The --zero run's verdicts (provided): the recovered momentum against
/// a one-device replay of the ledger that keeps its own momentum, replicas,
/// the ledger, what each recovery restored, and the buddy copies' bytes.
#pragma once

#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/fault_plan.h"
#include "dpt/options.h"
#include "dpt/verdict.h"
#include "zero_rank.h"

namespace dpt::ch16 {

/// The oracle: the flags' model on one device through every ledger entry,
/// momentum SGD (μ = 0.9) written out here: v ← μ·v + g, w ← w − lr·v. Fills
/// `params` and `momentum` (flat, Ψ each).
void replay_with_momentum(const Options& o, const Dataset& data, const std::vector<LedgerEntry>& ledger,
                          std::vector<float>& params, std::vector<float>& momentum);

/// The whole momentum from the finishers' shards (by their last index), Ψ
/// floats; empty if some index has no finisher.
std::vector<float> zero_gather_momentum(const ZeroRecord& record, int64_t psi);

/// The verdicts of one --zero run, each named "[policy] …".
void add_zero_verdicts(Verdicts& v, const Options& o, const Dataset& data, const FaultPlan& plan,
                       const ZeroSettings& s, ZeroRecord& record);

}  // namespace dpt::ch16
