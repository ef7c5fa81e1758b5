/// @file local_sgd.h
/// @brief Chapter 06's training loop (provided, not a hole): data-parallel
/// training where each step averages gradients, parameters, or nothing —
/// gradient averaging, local SGD, post-local SGD. After backward, a step under
/// --average params is ch06::local_sgd_step (the hole); under --average grads
/// the loop averages the gradients itself.
///
/// The core's loop (dpt/data_parallel.h) has one hook, before the optimizer
/// step; parameter averaging happens after it, so this chapter runs its own
/// loop from the same parts (sampler, strided shards, make_optimizer,
/// replica_spread). Its instrumentation (global loss, replica drift) talks
/// through all_gather and broadcast only, so the traffic log's "all_reduce"
/// bytes are the averaging's alone.
#pragma once

#include <cstdint>
#include <vector>

#include "ch06.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/options.h"

namespace dpt::ch06 {

/// What one run measured (the same on every rank, traffic included).
struct LocalSgdRun {
  std::vector<double> losses;         ///< global-batch loss per step (mean of the shards' losses, before averaging)
  std::vector<double> drift;          ///< per step: max |w_r − w_0| at the step's end (0 after an averaging)
  std::vector<int64_t> averaged_at;   ///< the steps after which parameters were averaged
  int64_t gradient_steps = 0;         ///< steps that averaged gradients
  double spread_after_averaging = 0;  ///< largest max |w_r − w_0| right after a parameter averaging (0: same bits)
  int64_t diverged_step = -1;         ///< first step with a non-finite loss (training stopped there); -1 if none
  TrafficLog traffic;                 ///< every rank's traffic during the loop
};

/// Collective: trains `replica` (identical on every rank at entry) for
/// options.steps steps on global batches of world · options.batch samples with
/// options.optimizer at options.lr, averaging as `schedule` says.
/// --average grads never calls the holes (it works before they are written).
LocalSgdRun train_local_sgd(Context& ctx, const Options& options, const Dataset& data, MLP& replica,
                            const Schedule& schedule);

}  // namespace dpt::ch06
