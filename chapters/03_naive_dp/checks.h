/// @file checks.h
/// @brief Chapter 03's summary rows and verdicts (provided, not a hole): what
/// the lecture measured, judged against the contracts in ch03.h.
#pragma once

#include "dpt/data_parallel.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

namespace dpt::ch03 {

/// What the lecture measured on every rank, for the verdicts on rank 0.
struct Measured {
  double gradient_bytes = 0;  ///< S = 4·Ψ
  double start_spread = 0;    ///< max |w_r − w_0| right after replicate_master
  double spread = 0;          ///< the same after training
};

/// The summary's rows for this run.
void add_summary_rows(Table& summary, const Context& ctx, const Options& o, const DataParallelRun& run);

/// The verdicts: finite loss, identical replicas before and after, the
/// host's bytes against 2(N−1)S (from the model's size), and shard_indices on
/// a global batch that does not divide (N·M + 1 samples over N ranks). On one
/// rank the distributed ones say they cannot fail.
void add_verdicts(Verdicts& v, const Context& ctx, const Options& o, const DataParallelRun& run, const Measured& m);

}  // namespace dpt::ch03
