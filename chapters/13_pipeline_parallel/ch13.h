/// @file ch13.h
/// @brief Chapter 13's holes, each specified once: the 1F1B schedule of one
/// stage, the micro-batches' gradients combined into the batch's, and the
/// run of a stage's schedule with its neighbours.
///
/// A model split by depth over P stages: stage s (rank s of its stage group)
/// holds a run of consecutive layers; a batch of B samples is cut into M
/// micro-batches; micro-batch m's activations flow from stage s to s+1
/// (forward, "F m") and their gradients back from s+1 to s (backward, "B m").
///
/// Fill the holes in `exercises/13_pipeline_parallel/`; tiered hints are in
/// \ref ch13_hints. `ctest --preset student -L ch13` checks them against one
/// device's gradient, a dependency clock written out in the test, and a
/// threads world whose every send waits for its receive.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dpt/comm/communicator.h"
#include "dpt/tensor.h"

namespace dpt::ch13 {

/// Forward or backward of one micro-batch on one stage.
enum class Pass { Forward, Backward };

/// One entry of a stage's schedule: "F 3" is the forward of micro-batch 3.
struct Op {
  Pass pass = Pass::Forward;  ///< forward or backward
  int micro_batch = 0;  ///< 0 <= micro_batch < M
  /// The same pass of the same micro-batch.
  bool operator==(const Op& other) const { return pass == other.pass && micro_batch == other.micro_batch; }
};
/// "F3", "B0".
std::string op_name(const Op& op);
/// "F0 F1 B0 B1".
std::string schedule_text(const std::vector<Op>& ops);

/// GPipe's schedule for stage `stage` of `stages` with `micro_batches`
/// micro-batches: every forward, F 0 … F M−1, then every backward, B 0 …
/// B M−1. Given (schedule.cpp): the worked example beside your 1F1B.
std::vector<Op> gpipe(int stage, int stages, int micro_batches);

/// The 1F1B ("one forward, one backward") schedule of stage `stage`
/// (0 <= stage < stages) with `micro_batches` >= 1 micro-batches.
///
/// Postconditions:
///  - it lists F m and B m exactly once for each m in 0 … M−1, the forwards
///    in increasing m, the backwards in increasing m, and B m after F m;
///  - at every point of the list the micro-batches forwarded but not yet
///    backwarded ("in flight", whose activations the stage holds) number at
///    most min(P − stage, M), P = stages;
///  - the P stages' schedules together take no longer than GPipe's: when every
///    forward takes f and every backward b, and an op starts once the op
///    before it on its stage is done and its input is there (F m on stage s:
///    F m done on s−1; B m on stage s: B m done on s+1), the last op ends at
///    (M + P − 1)(f + b).
/// (Hole: exercises/13_pipeline_parallel/one_f_one_b.cpp.)
std::vector<Op> one_f_one_b(int stage, int stages, int micro_batches);

/// Adds one micro-batch's gradients to the batch's.
///
/// On entry: `micro_grads[i]` is the gradient, with respect to parameter i,
/// of this micro-batch's mean loss (over its `micro_size` samples);
/// `batch_grads[i]` has the same shape; `batch_size` B is the number of
/// samples in the whole batch, all its micro-batches together (sizes may
/// differ from one micro-batch to the next).
///
/// Postcondition: when `batch_grads` starts at zero and this is called once
/// for every micro-batch of the batch, in any order, `batch_grads[i]` is the
/// gradient of the batch's mean loss (over its B samples) with respect to
/// parameter i, to float rounding. `micro_grads` is not changed.
/// (Hole: exercises/13_pipeline_parallel/accumulate.cpp.)
void accumulate_micro_batch(std::vector<Tensor>& batch_grads, const std::vector<Tensor>& micro_grads,
                            int64_t micro_size, int64_t batch_size);

/// What one stage computes, handed to run_schedule by the chapter (stage.h).
/// Stage s of P is rank s of the communicator; rank s−1 is the stage before
/// it, rank s+1 the one after.
struct StageWork {
  /// A tensor shaped like micro-batch m's input activation (stage s > 0
  /// only): where its values from stage s−1 may be received.
  std::function<Tensor(int m)> input_buffer;
  /// A tensor shaped like the gradient of micro-batch m's output (stage
  /// s < P−1 only): where its values from stage s+1 may be received.
  std::function<Tensor(int m)> output_grad_buffer;
  /// F m. `input`: micro-batch m's activation from stage s−1 (on stage 0,
  /// undefined: the stage reads the data itself). Returns the activation to
  /// hand to stage s+1 (on the last stage, undefined: the loss stays there).
  std::function<Tensor(int m, const Tensor& input)> forward;
  /// B m, after F m. `output_grad`: the gradient of micro-batch m's output,
  /// from stage s+1 (on the last stage, undefined: it starts from the loss).
  /// Returns the gradient of micro-batch m's input, to hand to stage s−1 (on
  /// stage 0, undefined).
  std::function<Tensor(int m, const Tensor& output_grad)> backward;
};

/// Runs `ops`, this stage's schedule, in order, exchanging with the
/// neighbouring stages what each op needs and produces. Collective over the
/// stages of `comm`: every stage calls it with its own schedule.
///
/// Postconditions:
///  - work.forward and work.backward were called once per op of `ops`, in the
///    order of `ops`, each with the values its neighbour computed for that
///    micro-batch (F m on stage s: what F m on stage s−1 returned; B m on
///    stage s: what B m on stage s+1 returned);
///  - every tensor a stage returns to hand on reaches its neighbour, and
///    nothing else is sent;
///  - it returns on every stage, even when every send waits until its receive
///    is posted (threads `--eager-limit 0`, or any MPI above its eager limit),
///    for gpipe's schedules and for schedules that can all run to the end as
///    their inputs arrive while stage s holds at most min(P − s, M)
///    micro-batches in flight (one_f_one_b's, and any others within that
///    bound), for any P, M. Orders freer than that (more in flight than the
///    bound, other than GPipe's) are neither promised nor tested.
/// (Hole: exercises/13_pipeline_parallel/run_schedule.cpp.)
void run_schedule(Communicator& comm, const std::vector<Op>& ops, const StageWork& work);

}  // namespace dpt::ch13
