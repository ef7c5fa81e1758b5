/// @file sections.h
/// @brief What chapter 13's lecture runs besides training (provided): which
/// holes are written, one probe step per schedule gathered to stage 0, and on
/// stage 0 the clock, the bubble, the memory and the Gantt chart from it.
#pragma once

#include <string>
#include <vector>

#include "dpt/report.h"
#include "dpt/verdict.h"
#include "pipeline_clock.h"
#include "stage.h"

namespace dpt::ch13 {

/// Chapter 13's own flags.
struct Ch13Flags {
  int stages = 4;                 ///< --stages P
  int micro_batches = 8;          ///< --micro-batches M
  int dp = 1;                     ///< --dp D: pipelines side by side, gradients all-reduced across them
  std::string schedule = "1f1b";  ///< --schedule gpipe | 1f1b: what training runs
  double stage_ms = 1;            ///< --stage-ms: the clock's forward per micro-batch per stage (backward 2x); 0 = measured
  int slow_stage = -1;            ///< --slow-stage S: the clock runs stage S at half speed (-1: none)
  std::string gantt;              ///< --gantt FILE.svg ("" none)
  std::string gantt_trace;        ///< --gantt-trace FILE.json ("" none)
};

/// The holes a run can use: each probed on its own rank with no message.
struct Written {
  bool one_f_one_b = true;   ///< one_f_one_b is written
  bool accumulate = true;    ///< accumulate_micro_batch is written
  bool run_schedule = true;  ///< run_schedule is written
  std::string missing;  ///< the NotImplemented messages of those that are not, "; "-joined
};
/// Probes the three holes locally (run_schedule with no op sends nothing).
Written written_holes(Communicator& comm, int stages, int micro_batches);

/// One probe step of `name`'s schedule as every stage of the pipeline ran it,
/// gathered to stage 0 (other stages get an empty result).
struct ProbedStep {
  std::string name;                   ///< "gpipe" or "1f1b"
  std::vector<std::vector<Op>> asked;  ///< the schedule each stage was given
  std::vector<StageStep> stages;      ///< what each stage measured (stage 0 only)
  std::vector<std::vector<int64_t>> bytes;  ///< bytes[a][b]: point-to-point bytes stage a sent b in the step (stage 0 only)
};
/// Collective over the stage group: one step of `schedule` on `batch`,
/// gradients computed then cleared, what each stage measured gathered to stage 0.
ProbedStep probe_step(Communicator& comm, PipelineStage& stage, const Batch& batch, int micro_batches,
                      const std::string& schedule);

/// Stage 0: the clock over the probed steps, the bubble and memory verdicts,
/// the slow stage's verdict, the table, and the Gantt chart and trace.
/// `boundary_floats[s]`: floats per sample crossing from stage s to s+1 (the
/// width there); `batch`: the pipeline's batch B.
void clock_and_memory(const Narrator& say, const Ch13Flags& f, const std::vector<ProbedStep>& probes,
                      const std::vector<int64_t>& boundary_floats, int64_t batch, Verdicts& v);

/// "" when the P stages' schedules can run to the end (each lists F m and
/// B m once for every m, and the clock finds no deadlock), else what is wrong.
std::string schedules_problem(const std::vector<std::vector<Op>>& schedules, int micro_batches);

/// Your accumulate_micro_batch on micro-batches of unequal sizes (1, about
/// B/2 − 1, the rest) of `batch`, against `model`'s gradient of the whole
/// batch's mean loss (stage 0 alone, before training; grads cleared after).
void accumulation_check(const Narrator& say, const MLP& model, const Batch& batch, Verdicts& v);

/// Stage 0: the clock over schedules alone (equal stages, b = 2f) for M = 1,
/// 2, 4, … 32: the bubble against (P−1)/(M+P−1), and the micro-batches each
/// schedule holds on stage 0 — the trade the chapter is about, in one table.
void micro_batch_sweep(const Narrator& say, int stages, bool with_1f1b, Verdicts& v);

/// Collective over `world`, every rank of the run: rank 0 rehearses your
/// run_schedule on each of `schedules` (rehearsal.cpp: P stand-in stages of
/// micro_size x width tensors on a private world of rank threads, sends above
/// `eager_limit_bytes` waiting for their receive, every wait bounded by a few
/// seconds) and adds a verdict for each; every rank gets those that ran to
/// the end, in order. `boundary_floats[s]`: the width between stages s and s+1.
std::vector<std::string> schedules_that_run(Communicator& world, const std::vector<std::string>& schedules, int stages,
                                            int micro_batches, int64_t micro_size,
                                            const std::vector<int64_t>& boundary_floats, int64_t eager_limit_bytes,
                                            const Narrator& say, Verdicts& v);

/// The ops of a schedule by name ("gpipe" or "1f1b") for stage s.
std::vector<Op> schedule_of(const std::string& name, int stage, int stages, int micro_batches);

}  // namespace dpt::ch13
