// ch03_naive_dp — naive data parallel: replicas, shards, averaging on the host.
//
// What it teaches: data parallelism in its plainest form. A CPU master copy
// of the weights is broadcast to N replicas (one per rank, each on its own
// device), so all start identical. Every step the global batch of N·M samples
// is cut into N shards of M; each rank runs forward and backward on its shard;
// the gradients travel device → host, are averaged there, and travel back;
// every replica takes the same optimizer step and stays identical. Because the
// loss is a mean, N ranks × batch M compute exactly what one device with
// batch N·M computes — the chapter checks it.
//
// What it leaves out: an efficient average. Everything funnels through the
// host: 2·(N−1)·S bytes per step through one point. Chapter 04 fixes that.
//
// Run it:
//     build/reference/bin/ch03_naive_dp --ranks 4                # 4 threads, simulated devices
//     build/reference/bin/ch03_naive_dp --ranks 4 --link pcie    # pay PCIe-like costs
//     mpirun -np 4 build/reference/bin/ch03_naive_dp --comm mpi  # 4 processes
//
// Your holes: dpt::ch03::shard_indices and dpt::ch03::host_average_gradients.
#include <CLI/CLI.hpp>
#include <iostream>

#include "ch03_holes.h"
#include "data_parallel.h"
#include "dpt/report.h"

using namespace dpt;

// ----------------------------------------------------------------------------
// 1. host traffic: what the naive average costs

void report_traffic(Context& ctx, const Options& o, const MLP& model, const ch03::DataParallelRun& run) {
  double gradient_bytes = double(model.num_parameters()) * sizeof(float);  // S
  double per_step = o.steps > 0 ? double(run.traffic_bytes) / double(o.steps) : 0;
  Table table("host traffic per step (S = " + format_bytes(gradient_bytes) + " of gradients)",
              {"ranks N", "through the host: 2(N-1)S", "measured"});
  for (int n : {1, 2, 4, 8, 16, 64}) {
    table.add_row({std::to_string(n), format_bytes(2.0 * (n - 1) * gradient_bytes),
                   n == ctx.world ? format_bytes(per_step) : "-"});
  }
  if (ctx.world > 16 || ctx.world == 3)
    table.add_row({std::to_string(ctx.world), format_bytes(2.0 * (ctx.world - 1) * gradient_bytes), format_bytes(per_step)});
  if (!o.quiet) table.print(std::cout);
}

// ----------------------------------------------------------------------------
// 2. the lecture, run by every rank

void run_rank(Context& ctx, const Options& o, bool verify) {
  Narrator say(ctx.is_root() && !o.quiet);
  say.section("1. Set-up: " + std::to_string(ctx.world) + " ranks (" + ctx.comm.backend() + ")");
  Dataset data = load_dataset(o);  // every rank reads the same data set
  MLP replica = ch03::make_replica(ctx, o);
  say.say("master copy on the host of rank 0, broadcast to " + std::to_string(ctx.world) + " replicas on " +
          ctx.device.name().substr(0, 3) + ":0.." + std::to_string(ctx.world - 1) + " (" +
          format_bytes(double(replica.num_parameters()) * 4) + " each)");
  say.say("global batch " + std::to_string(o.batch * ctx.world) + " = " + std::to_string(ctx.world) +
          " shards of --batch " + std::to_string(o.batch));
  if (o.steps == 0) {
    if (ctx.is_root()) save_outputs(o, replica, data);
    return;
  }
  say.section("2. Training: shard, forward/backward, average on the host, step");
  auto average = [](Context& c, std::vector<Tensor>& grads) { ch03::host_average_gradients(c.comm, grads); };
  ch03::DataParallelRun run = ch03::train_data_parallel(ctx, o, data, replica, average, "ch03 train");
  if (ctx.is_root()) save_outputs(o, replica, data);

  if (!ctx.is_root()) return;
  say.section("3. What the host carried");
  report_traffic(ctx, o, replica, run);
  say.say("Every gradient byte goes up to the host and comes back down: the host's link\n"
          "carries 2(N-1)S per step and grows with N, while each rank's own link sits idle.");
  double difference = -1;
  if (verify) {
    say.section("4. Is it really the same as one device?");
    difference = ch03::single_device_difference(o, data, ctx.world, replica);
    say.say("one device, batch " + std::to_string(o.batch * ctx.world) + ", same start, same samples: max |w_dp - w_single| = " +
            fmt(difference, 3));
  }
  Evaluation after = evaluate(replica, data);
  Table summary("ch03 summary", {"what", "value"});
  summary.add_row({"ranks x batch per rank", std::to_string(ctx.world) + " x " + std::to_string(o.batch)});
  summary.add_row({"loss: first step -> last step", fixed(run.losses.front(), 4) + " -> " + fixed(run.losses.back(), 4)});
  summary.add_row({"accuracy on the data set", fixed(100 * after.accuracy, 1) + "%"});
  summary.add_row({"time (compute / averaging)", fixed(run.seconds, 2) + " s (" + fixed(run.compute_seconds, 2) +
                                                      " / " + fixed(run.comm_seconds, 2) + " s on rank 0)"});
  summary.add_row({"bytes moved per step", format_bytes(double(run.traffic_bytes) / double(o.steps))});
  summary.add_row({"max |w - w_single-device|", verify ? fmt(difference, 3) : "not checked (--no-verify)"});
  summary.print(std::cout);
}

int main(int argc, char** argv) {
  CLI::App app{"ch03_naive_dp — naive data parallel: replicas, shards, averaging on the host", "ch03_naive_dp"};
  Options options;
  LaunchOptions launch_options;
  bool verify = true;
  add_common_flags(app, options);
  add_launch_flags(app, launch_options);
  ch03::add_data_parallel_flags(app, verify);
  parse_flags(app, argc, argv);
  return run_guarded("ch03_naive_dp", [&] {
    launch(launch_options, [&](Context& ctx) { run_rank(ctx, options, verify); });
  });
}
