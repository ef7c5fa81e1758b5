/// @file zero_setup.h
/// @brief Chapter 07's flags and set-up (provided, not a hole): the flags,
/// the plan they make, the master copy every rank starts from, the flags
/// every rank must agree on, and --compare-stages.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dpt/cli_fwd.h"
#include "dpt/fault_plan.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "dpt/verdict.h"
#include "zero_engine.h"

namespace dpt::ch07 {

/// Chapter 07's own flags.
struct Ch07Flags {
  int stage = 3;                ///< --stage 0 … 3
  bool prefetch = false;        ///< --prefetch: gather layer l+1 while layer l computes (stage 3)
  bool compare = false;         ///< --compare-stages
  double bucket_mb = 0.25;      ///< --bucket-mb: each gradient bucket's cap
  double weight_decay = -1;     ///< --weight-decay (-1: the optimizer's default, adam 0, adamw 0.01)
  std::string device_memory;    ///< --device-memory: each device's capacity ("" none)
  std::string report_json;      ///< --report-json FILE
  std::string save_checkpoint;  ///< --save-checkpoint DIR
  std::string resume;           ///< --resume DIR
  std::string consolidate;      ///< --consolidate DIR
  int64_t checkpoint_every = 0;  ///< with --save-checkpoint: every K steps (0: only after the last)
  FaultFlags faults;            ///< `--fail RANK@STEP` (under mpirun, crash only: zero_fault.h)
  double max_loss = 0;          ///< --max-loss X: a loss above it stops the run, exit 5 (0: only a non-finite one stops it)
  std::vector<int64_t> skip_batches;  ///< --skip-batch K (repeatable): batches never drawn
};

/// The exit code of a run that --max-loss stopped (a loss above it, or not
/// finite): what scripts/dptrun reads as "roll back and skip the batch".
constexpr int kLossSpikeExit = 5;

/// Registers chapter 07's flags (and narrows --optimizer to adam | adamw: a
/// bad value is refused at parse time, exit 2, like every bad flag); once
/// every flag is known, checks --fail against the run (`options`: its steps).
void add_ch07_flags(CLI::App& app, Ch07Flags& flags, const Options& options);

/// The trainer's plan from the flags.
ZeroPlan plan_of(const Options& o, const Ch07Flags& f);

/// "2MiB", "512KiB", "3MB", "1GiB" or plain bytes; "" is 0 (no cap).
int64_t parse_size(const std::string& text);

/// Collective: rank 0 builds the master copy (seeded, or --load-weights) and
/// broadcasts it; every rank returns the Ψ floats.
std::vector<float> initial_parameters(Context& ctx, const Options& o);

/// Collective: stages 0–3 side by side (step time, bytes, peak memory), with
/// a verdict per stage on its bytes and on its weights against stage 0's.
void compare_stages(Context& ctx, const Options& o, const Dataset& data, const Ch07Flags& f, Verdicts& verdicts);

}  // namespace dpt::ch07
