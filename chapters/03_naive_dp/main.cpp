// ch03_naive_dp — naive data parallel: replicas, shards, averaging on the host.
//
// What it teaches: data parallelism in its plainest form. A CPU master copy
// of the weights is broadcast to N replicas (one per rank, each on its own
// device), so all start identical. Every step the global batch of N·M samples
// is cut into N shards of M; each rank runs forward and backward on its shard;
// the gradients travel device → host, are averaged there, and travel back;
// every replica takes the same optimizer step and stays identical. Because the
// loss is a mean, N ranks × batch M compute exactly what one device with
// batch N·M computes — the chapter checks it, and ends with verdicts.
//
// What it leaves out: an efficient average. Everything funnels through the
// host: 2·(N−1)·S bytes per step through one point. Chapter 04 fixes that.
// The loop itself is the core's (dpt/data_parallel.h); this chapter plugs in
// its sharding and its gradient average.
//
// Run it:
//     build/reference/bin/ch03_naive_dp --ranks 4                # 4 threads, simulated devices
//     build/reference/bin/ch03_naive_dp --ranks 4 --link pcie    # pay PCIe-like costs
//     mpirun --oversubscribe -np 4 build/reference/bin/ch03_naive_dp --comm mpi
//
// Your holes (chapters/03_naive_dp/ch03.h): ch03::shard_indices and
// ch03::host_average_gradients. Exit code: 0 all verdicts ✔, 3 one ✘, 1 error.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <set>

#include "ch03.h"
#include "dpt/data_parallel.h"
#include "dpt/report.h"
#include "dpt/step_check.h"
#include "dpt/verdict.h"

using namespace dpt;

void report_host_traffic(const Context& ctx, const Options& o, double gradient_bytes, double measured);
void report_summary(const Context& ctx, const Options& o, const DataParallelRun& run, const Dataset& data,
                    const HeldOut& held_out, const MLP& replica);
void add_verdicts(Verdicts& v, const Context& ctx, const DataParallelRun& run, double gradient_bytes,
                  double spread);

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates and returns the exit code

int lecture(Context& ctx, const Options& o, bool verify) {
  Narrator say(ctx.is_root() && !o.quiet);
  // ---- 1. Set-up
  say.section("1. Set-up: " + std::to_string(ctx.world) + " ranks (" + ctx.comm.backend() + ")");
  Dataset data = load_dataset(o);  // every rank reads the same data set
  check_ranks_agree(ctx.comm, o, data);  // same flags and data on every rank, or one line saying who differs
  HeldOut held_out = ctx.is_root() ? load_held_out(o, data) : HeldOut{};  // rank 0 scores it at the end
  MLP replica = make_replica(ctx, o);
  const double gradient_bytes = double(replica.num_parameters()) * sizeof(float);  // S
  say.say("master copy on the host of rank 0, broadcast to " + std::to_string(ctx.world) + " replicas on " +
          ctx.device.name().substr(0, 3) + ":0.." + std::to_string(ctx.world - 1) + " (" +
          format_bytes(gradient_bytes) + " each; each replica was initialised apart, the broadcast makes them equal)");
  say.say("global batch " + std::to_string(o.batch * ctx.world) + " = " + std::to_string(ctx.world) +
          " shards of --batch " + std::to_string(o.batch));
  if (o.steps == 0) {
    if (ctx.is_root()) save_outputs(o, replica, data);
    return 0;
  }

  // ---- 2. Training
  say.section("2. Training: shard, forward/backward, average on the host, step");
  auto average = [](Context& c, std::vector<Tensor>& grads) { ch03::host_average_gradients(c.comm, grads); };
  StepRecorder recorder(ctx.is_root() && verify);  // rank 0 keeps the state around chosen steps
  DataParallelRun run = train_data_parallel(ctx, o, data, replica, average, "ch03 train", ch03::shard_indices, &recorder);
  double spread = replica_spread(ctx, replica);  // collective: every rank takes part
  if (!ctx.is_root()) return 0;
  save_outputs(o, replica, data);

  // ---- 3. What the host carried
  say.section("3. What the host carried");
  report_host_traffic(ctx, o, gradient_bytes, run.bytes_per_step());
  say.say("Every gradient byte goes up to the host and comes back down: the host's link\n"
          "carries 2(N-1)S per step and grows with N, while each rank's own link sits idle.");

  // ---- 4. Is it really the same as one device?
  StepCheck check;
  if (verify) {
    say.section("4. Is it really the same as one device?");
    check = recorder.replay(o, data, o.batch * ctx.world);
    say.say("one device, batch " + std::to_string(o.batch * ctx.world) + ", given the run's weights before each of " +
            std::to_string(check.checked.size()) + " steps,\ncomputed that step's gradient on the same samples: "
            "max |g_dp - g_single| / max |g_single| = " + fmt(check.difference, 3) + "\n(step by step: whole runs "
            "compared only at their end drift apart once a ReLU input\nsits within rounding of 0; see dpt/step_check.h)");
  }

  // ---- 5. Summary and verdicts
  report_summary(ctx, o, run, data, held_out, replica);
  Verdicts verdicts;
  add_verdicts(verdicts, ctx, run, gradient_bytes, spread);
  if (verify) add_step_check_verdicts(verdicts, check);
  verdicts.print(std::cout);
  return verdicts.exit_code();
}

// ----------------------------------------------------------------------------
// 3. the host-traffic table: theory for a few world sizes, and this run's
// measurement in the row of its own size (added when not among them)

void report_host_traffic(const Context& ctx, const Options& o, double gradient_bytes, double measured) {
  std::set<int> sizes = {1, 2, 4, 8, 16, 64};
  sizes.insert(ctx.world);
  Table table("host traffic per step (S = " + format_bytes(gradient_bytes) + " of gradients)",
              {"ranks N", "through the host: 2(N-1)S", "measured"});
  for (int n : sizes)
    table.add_row({std::to_string(n), format_bytes(2.0 * (n - 1) * gradient_bytes),
                   n == ctx.world ? format_bytes(measured) : "-"});
  if (!o.quiet) table.print(std::cout);
}

// ----------------------------------------------------------------------------
// 5. the summary table and the verdicts

void report_summary(const Context& ctx, const Options& o, const DataParallelRun& run, const Dataset& data,
                    const HeldOut& held_out, const MLP& replica) {
  Table summary("ch03 summary", {"what", "value"});
  summary.add_row({"ranks x batch per rank", std::to_string(ctx.world) + " x " + std::to_string(o.batch)});
  summary.add_row({"loss: first step -> last step", fixed(run.losses.front(), 4) + " -> " + fixed(run.losses.back(), 4)});
  report_held_out(replica, data, held_out, int64_t(run.losses.size()), o.metrics, summary);
  summary.add_row({"time (compute / averaging)", fixed(run.seconds, 2) + " s (" + fixed(run.compute_seconds, 2) +
                                                      " / " + fixed(run.sync_seconds, 2) + " s on rank 0)"});
  summary.add_row({"bytes moved per step", format_bytes(run.bytes_per_step())});
  summary.print(std::cout);
}

void add_verdicts(Verdicts& v, const Context& ctx, const DataParallelRun& run, double gradient_bytes,
                  double spread) {
  v.holds("the loss stayed finite", run.diverged_step < 0,
          run.diverged_step < 0 ? "" : "it was " + fmt(run.losses.back(), 3) + " at step " +
                                           std::to_string(run.diverged_step) + "; is the average finite?");
  v.at_most("replicas identical: max |w_r - w_0|", spread, 0,
            "every rank applies the same averaged gradient to the same start");
  v.near("host traffic per step (bytes)", run.bytes_per_step(), 2.0 * (ctx.world - 1) * gradient_bytes, 0,
         "2(N-1)S exactly: N-1 ranks send S up, the host sends S back to each");
}

// ----------------------------------------------------------------------------
// flags, then the lecture on every rank

int main(int argc, char** argv) {
  CLI::App app{"ch03_naive_dp — naive data parallel: replicas, shards, averaging on the host", "ch03_naive_dp"};
  Options options;
  LaunchOptions launch_options;
  bool verify = true;
  add_common_flags(app, options);
  add_launch_flags(app, launch_options);
  add_data_parallel_flags(app, verify);
  parse_flags(app, argc, argv);
  return run_lecture("ch03_naive_dp", launch_options, [&](Context& ctx) { return lecture(ctx, options, verify); });
}
