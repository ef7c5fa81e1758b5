/// @file diloco.h
/// @brief DiLoCo's training loop (provided, not a hole): each rank takes H
/// inner optimizer steps (--optimizer, on its own shard, sending nothing),
/// then every rank calls ch10::diloco_outer_step, the outer optimizer's
/// step, which takes the round as one step of one model. H times fewer
/// messages than data parallelism, each as large as its all-reduce.
/// The core's loop (dpt/data_parallel.h, run_data_parallel) does the
/// bookkeeping; its loss all-reduce (4 bytes a step) is the only other message.
#pragma once

#include <cstdint>
#include <string>

#include "dpt/data_parallel.h"

namespace dpt::ch10 {

/// --inner-steps, --outer-lr, --outer-momentum.
struct Diloco {
  int64_t inner_steps = 10;    ///< H >= 1
  float outer_lr = 0.7f;       ///< the outer SGD's learning rate (DiLoCo's paper: 0.7)
  float outer_momentum = 0.9f; ///< its Nesterov momentum (the paper: 0.9)
};

/// What a DiLoCo run measured.
struct DilocoRun {
  bool written = true;          ///< false: the hole threw NotImplemented
  std::string not_written;      ///< its message ("not implemented: ch10: …") when written is false
  DataParallelRun run;          ///< losses; every rank's traffic during the loop
  int64_t outer_steps = 0;      ///< outer steps taken (options.steps / H)
  double replica_spread = 0;    ///< max |w_r − w_0| at the end (0 after an outer step)
};

/// Collective: trains `replica` (fresh from make_replica) for options.steps
/// inner steps, an outer step after every H-th. options.steps must be a
/// multiple of H (the chapter's flags check it).
DilocoRun train_diloco(Context& ctx, const Options& options, const Dataset& data, MLP& replica, const Diloco& diloco);

}  // namespace dpt::ch10
