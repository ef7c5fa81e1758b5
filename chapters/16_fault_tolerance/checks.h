/// @file checks.h
/// @brief Chapter 16's verdicts (provided): what the run left in its record,
/// judged against the oracles (replay.h) and the plan it was given.
#pragma once

#include "dpt/data.h"
#include "dpt/fault_plan.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "elastic_rank.h"
#include "run_record.h"

namespace dpt::ch16 {

/// Summary rows and verdicts: replicas identical, the run equal to the
/// ledger's one-device replay, every sample once, the last quorum the plan's
/// survivors, each heal's bytes and weights, each bit flip found and named.
void add_ch16_verdicts(Verdicts& v, Table& summary, const Options& o, const Dataset& data, const FaultPlan& plan,
                       const ElasticSettings& s, RunRecord& record);

}  // namespace dpt::ch16
