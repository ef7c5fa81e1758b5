// ch07_zero — ZeRO stages 0–3: shard optimizer state, then gradients, then
// parameters, and watch each rank's memory shrink.
//
// What it teaches: plain data parallel keeps a full copy of everything on
// every rank — with fp32 Adam 16 bytes per parameter (4 weights, 4 gradients,
// 8 for m and v). ZeRO cuts one flat buffer of all Ψ parameters into N equal
// shards and lets each rank keep only its own shard of the optimizer state
// (stage 1: 8Ψ + 8Ψ/N), of the gradients too (stage 2: reduce-scatter bucket
// by bucket during backward, 4Ψ + 12Ψ/N), and of the parameters too (stage 3:
// gather a layer just before its forward and again before its backward, 16Ψ/N).
// The chapter trains one stage, measures memory by category through the
// device's accounting and bytes through the traffic log, sets both next to
// the formulas, and checks the weights against stage 0 and one device.
//
// What it leaves out: mixed precision, CPU/NVMe offload, overlapping the
// reduce-scatter with backward (chapter 05 showed how); the formulas' theory
// is in docs/ch07_zero.md.
//
// Run it (bare, it runs 4 ranks at stage 3):
//     build/reference/bin/ch07_zero
//     build/reference/bin/ch07_zero --ranks 4 --stage 0 --device-memory 2MiB   # out of memory
//     build/reference/bin/ch07_zero --ranks 4 --stage 3 --device-memory 2MiB   # fits
//     build/reference/bin/ch07_zero --ranks 4 --compare-stages                 # 0..3 side by side
//     mpirun --oversubscribe -np 4 build/reference/bin/ch07_zero --comm mpi --stage 2
//     build/reference/bin/ch07_zero --ranks 4 --stage 3 --device cuda          # on GPUs, each rank its own account
//     scripts/dptrun -np 4 -- build/reference/bin/ch07_zero --batch 6 --save-checkpoint ck --checkpoint-every 2 --fail 2@5
//         # rank 2 killed at step 5 under mpirun; the supervisor resumes from step 4 on 3 ranks (docs/ch16_restarts.md)
//
// Your holes (chapters/07_zero/ch07.h): partition_parameters, shard_bounds;
// on_bucket_ready and update_parameters (what makes a stage that stage);
// use_layer (the life of a layer's parameters around each use: at stage 3,
// gathered before and let go after).
// Exit code: 0 all verdicts ✔, 3 one ✘, 1 error, 5 stopped by --max-loss.
#include <CLI/CLI.hpp>
#include <iostream>

#include "ch07.h"
#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/lecture.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/output_file.h"
#include "dpt/report.h"
#include "dpt/timing.h"
#include "zero_checkpoint.h"
#include "zero_engine.h"
#include "zero_report.h"
#include "zero_setup.h"

using namespace dpt;
using namespace dpt::ch07;

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates. Flags, data, the held-out
// score, the step check and printing the verdicts are the harness's (lecture.h).

void lecture(Lecture& lec, const Ch07Flags& f, int64_t& spike_step) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  const Dataset& data = lec.data;
  if (!f.consolidate.empty()) {  // no training: one safetensors file from the shards
    DPT_CHECK(!o.save_weights.empty(), "--consolidate DIR writes the weights to --save-weights FILE: give one");
    if (ctx.is_root()) consolidate_zero_checkpoint(f.consolidate, o.save_weights);
    say.say("wrote " + o.save_weights + " from the checkpoint in " + f.consolidate);
    return;
  }
  const int64_t capacity = parse_size(f.device_memory);
  ZeroPlan plan = plan_of(o, f);
  std::vector<float> initial = initial_parameters(ctx, o);
  Partition part = partition_parameters(int64_t(initial.size()), ctx.world);
  if (o.steps == 0) {  // only the outputs asked for
    lec.keep(build_model(o, Device::host()));
    return;
  }

  // ---- 1. The partition
  say.section(str("1. One flat buffer of Ψ = ", part.psi, " parameters, cut in N = ", ctx.world, " shards of S = ",
                  part.shard));
  say.say(str("Padded with ", part.padded - part.psi, " zeros to N·S = ", part.padded,
              ". Rank r owns [r·S, (r+1)·S) of the parameters, gradients and Adam's m and v\n"
              "(stage 1 shards m, v; stage 2 the gradients too; stage 3 the parameters too)."));
  if (ctx.is_root()) check_partition(part, lec.verdicts);  // zero_report.cpp: the run's Ψ and its neighbours
  if (f.compare) {
    compare_stages(ctx, o, data, f, lec.verdicts);
    return;
  }

  // ---- 2. Training
  say.section("2. Training at stage " + std::to_string(f.stage) + (f.prefetch ? " with --prefetch" : "") + ", " +
              (plan.adam.decoupled ? "AdamW" : "Adam") + " (weight decay " + fmt(plan.adam.weight_decay) + ")");
  if (capacity > 0) {
    ctx.device.set_capacity(std::size_t(capacity));
    say.say("Each rank's device holds at most " + format_bytes(double(capacity)) + " (--device-memory).");
  }
  std::string resuming;
  ZeroCheckpoints checkpoints = zero_checkpoints(ctx, o, f, plan.adam, resuming);  // --resume, --save-checkpoint
  if (!resuming.empty()) say.say(resuming);
  if (f.stage == 0) plan.recorder = &lec.recorder;  // rank 0's step-by-step check against one device
  ZeroRun run = train_zero(ctx, o, data, initial, plan, "ch07 stage " + std::to_string(f.stage), checkpoints);
  ctx.device.set_capacity(0);  // the checks below train references: not under the cap
  if (f.max_loss > 0 && run.diverged_step >= 0 && ctx.is_root()) {  // a spike: exit 5, for scripts/dptrun
    spike_step = run.diverged_step;
    std::cerr << str("ch07_zero: loss spike at step ", run.diverged_step, " (batch ", run.diverged_batch, "): loss ",
                     run.losses.back(), ", above --max-loss ", f.max_loss, " or not finite; stopped before any later ",
                     "save, exit ", kLossSpikeExit, " (resume from the last checkpoint with --skip-batch ",
                     run.diverged_batch, ")\n");
  }

  // ---- 3. Memory and traffic, next to the formulas
  say.section("3. Memory per rank and bytes per step, next to the ZeRO formulas");
  Verdicts& verdicts = lec.verdicts;  // judged on rank 0
  report_memory(ctx, run, part, f.stage, f.prefetch, verdicts, !o.quiet);
  if (ctx.is_root()) report_traffic(run, part, f.stage, verdicts, !o.quiet);  // one rank: says it cannot fail
  nlohmann::json report = run_json(ctx, run, part, f.stage, f.prefetch);
  if (ctx.is_root() && !f.report_json.empty()) write_output_file(f.report_json, report.dump(1) + "\n");

  // ---- 4. The same weights as stage 0, and as one device (and the mean, probed)
  if (ctx.is_root()) check_bucket_mean(lec.verdicts);  // every stage, on a world of its own: 3 ranks
  std::vector<float> stage0;
  if (lec.verify && f.stage != 0) {
    say.section("4. The same run at stage 0 (plain data parallel), for comparison");
    ZeroPlan zero = plan;
    zero.stage = 0, zero.recorder = &lec.recorder;
    Options quiet = o;
    quiet.quiet = true, quiet.metrics.clear();
    // From the same start: the master copy, or the checkpoint this run resumed
    // (possibly written by another number of ranks, which sums in another order).
    checkpoints.after = nullptr, checkpoints.starting = nullptr;
    stage0 = train_zero(ctx, quiet, data, initial, zero, "stage 0", checkpoints).weights;
  }
  if (!ctx.is_root()) return;
  MLP model = build_model(o, Device::host());
  std::vector<Tensor> params = model.parameters();
  unflatten(run.weights, params);
  lec.keep(model);
  verdicts.holds(f.max_loss > 0 ? "the loss stayed finite and at most --max-loss " + fmt(f.max_loss)
                                 : std::string("the loss stayed finite"),
                 run.diverged_step < 0,
                 run.diverged_step < 0 ? "" : "not at step " + std::to_string(run.diverged_step));
  if (!stage0.empty() && ctx.world == 1)
    verdicts.cannot_fail("max |w_stage" + std::to_string(f.stage) + " - w_stage0|", on_one_rank(4));
  else if (!stage0.empty())
    verdicts.at_most("max |w_stage" + std::to_string(f.stage) + " - w_stage0|", max_abs_difference(run.weights, stage0), 0,
                     "every stage sums each gradient in the same ring order and runs the same Adam: the same bits");

  // ---- 5. Summary (the harness adds held-out accuracy and the step check, then prints)
  Table& summary = lec.summary;
  summary.add_row({"stage, ranks x batch per rank", str(f.stage, ", ", ctx.world, " x ", o.batch)});
  summary.add_row({"loss: first step -> last step", fixed(run.losses.front(), 4) + " -> " + fixed(run.losses.back(), 4)});
  summary.add_row({"peak memory, rank 0", format_bytes(run.memory.peak_total)});
  summary.add_row({"formula " + formula_text(f.stage), format_bytes(formula_bytes(f.stage, double(part.psi), ctx.world))});
  summary.add_row({"median step time, rank 0", fixed(median(run.step_seconds) * 1e3, 2) + " ms"});
}

// ----------------------------------------------------------------------------
// flags, then the lecture on every rank

int main(int argc, char** argv) {
  Chapter chapter{"ch07_zero", "ZeRO stages 0-3: sharded optimizer state, gradients, parameters"};
  chapter.defaults.model = "64-256-256-256-256-10";  // Ψ = 216,586: 3.3 MiB at stage 0, 0.83 MiB per rank at stage 3 (N = 4)
  chapter.defaults.optimizer = "adam";
  chapter.defaults.lr = 1e-3f;
  chapter.defaults.steps = 50;
  chapter.default_ranks = 4;  // the page's first command: on one rank nothing is sharded
  chapter.rank_local_flags = {"--report-json", "--consolidate"};  // rank 0 writes them
  Ch07Flags flags;
  auto add_flags = [&flags](CLI::App& app, Options& options) { add_ch07_flags(app, flags, options); };  // zero_setup.cpp
  int64_t spike_step = -1;  // rank 0's: the step --max-loss stopped at, for the exit code
  const int code =
      run_chapter(argc, argv, chapter, add_flags, [&flags, &spike_step](Lecture& lec) { lecture(lec, flags, spike_step); });
  return spike_step >= 0 && (code == 0 || code == 3) ? kLossSpikeExit : code;
}
