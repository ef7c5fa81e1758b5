// ch03_naive_dp — naive data parallel: replicas, shards, averaging on the host.
//
// What it teaches: data parallelism in its plainest form. A CPU master copy
// of the weights reaches N replicas (one per rank, each on its own device).
// Every step the global batch of N·M samples is cut into N shards of M; each
// rank runs forward and backward on its shard; the gradients travel to the
// host, are averaged there and travel back; every replica takes the same
// optimizer step. Done right, N ranks × batch M compute what one device with
// batch N·M computes — the chapter checks it step by step, and ends with
// verdicts. You write all of it: the start, the shards, the average, the step.
//
// What it leaves out: an efficient average. Everything funnels through the
// host (rank 0). Chapter 04 fixes that. The loop around your step (drawing
// each step's global batch, the progress bar, timing, the traffic log) is the
// core's run_data_parallel (dpt/data_parallel.h).
//
// Run it:
//     build/reference/bin/ch03_naive_dp --ranks 4                # 4 threads, simulated devices
//     build/reference/bin/ch03_naive_dp --ranks 4 --link pcie    # pay PCIe-like costs
//     mpirun --oversubscribe -np 4 build/reference/bin/ch03_naive_dp --comm mpi
//     build/reference/bin/ch03_naive_dp --batchnorm local         # per-rank batch norm: the gap
//     build/reference/bin/ch03_naive_dp --batchnorm sync          # SyncBatchNorm: one device again
//
// Your holes (chapters/03_naive_dp/ch03.h): replicate_master, shard_indices,
// host_average_gradients, naive_data_parallel_step; for --batchnorm sync,
// sync_batch_moments and sync_gradient_sums (sync_batch_norm.h).
// Exit code: 0 all verdicts ✔, 3 one ✘, 1 error.
#include <iostream>
#include <optional>
#include <set>

#include "ch03.h"
#include "checks.h"
#include "sync_batch_norm.h"
#include "dpt/data_parallel.h"
#include "dpt/lecture.h"

using namespace dpt;

void report_host_traffic(const Context& ctx, const Options& o, const Narrator& say, double gradient_bytes,
                         double measured);

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates. Flags, data, the held-out
// score, the step check's verdict and printing are the harness's (lecture.h).

void lecture(Lecture& lec) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  // ---- 1. Set-up: the data, the master copy, the replicas
  say.section(str("1. Set-up: ", ctx.world, " ranks (", ctx.comm.backend(), ")"));
  std::optional<MLP> master;  // the master copy: only on rank 0, on its host
  if (ctx.is_root()) master.emplace(build_model(o, Device::host()));
  MLP replica = make_replica_apart(ctx, o);  // this rank's model on its device, from a seed of its own
  ch03::replicate_master(ctx.comm, master ? &*master : nullptr, replica);
  broadcast_running_statistics(ctx.comm, master ? &*master : nullptr, replica);  // batch norm's buffers, not weights
  lec.keep(replica);
  const double start_spread = replica_spread(ctx, replica);  // collective: 0 when every replica is the master
  const double gradient_bytes = double(replica.num_parameters()) * sizeof(float);  // S
  say.say(str("master copy on the host of rank 0, copied to ", ctx.world, " replicas on ",
              ctx.device.name().substr(0, 3), ":0..", ctx.world - 1, " (", format_bytes(gradient_bytes),
              " each; each replica was initialised apart: only your\nreplicate_master makes them equal)"));
  say.say(str("global batch ", o.batch * ctx.world, " = ", ctx.world, " shards of --batch ", o.batch));
  ch03::SyncBatchStatistics sync(ctx.comm);  // your sync_batch_norm.cpp, used with --batchnorm sync
  if (o.batchnorm == "sync") {
    replica.set_batch_statistics(&sync);
    lec.step_check_cause = "with --batchnorm sync, the ranks' gradient is not one device's on the global batch (is it "
                           "without --batchnorm? then sync_batch_moments or sync_gradient_sums: ctest -L ch03 names "
                           "the property)";
  }
  if (o.batchnorm != "none")
    say.say(o.batchnorm == "local" ? "--batchnorm local: each rank normalizes by its own shard's statistics"
                                   : "--batchnorm sync: every rank normalizes by the global batch's statistics");
  if (o.steps == 0) return;

  // ---- 2. Training: your step, every step, on every rank
  say.section("2. Training: shard, forward/backward, average on the host, step");
  auto optimizer = make_optimizer(o.optimizer, replica.parameters(), o.lr);  // one per replica, same state
  auto step = [&](const std::vector<int64_t>& global_batch) {
    return ch03::naive_data_parallel_step(ctx, replica, *optimizer, lec.data, global_batch);
  };
  DataParallelRun run = run_data_parallel(ctx, o, lec.data, replica, step, "ch03 train", &lec.recorder);
  const double spread = replica_spread(ctx, replica);  // collective: every rank takes part
  if (!ctx.is_root()) return;

  // ---- 3. What the host carried
  say.section("3. What the host carried");
  report_host_traffic(ctx, o, say, gradient_bytes, run.bytes_per_step());

  // ---- 4. Is it really the same as one device?
  if (lec.verify) {
    say.section("4. Is it really the same as one device?");
    const StepCheck& check = lec.step_check();
    say.say(str("one device, batch ", o.batch * ctx.world, ", given the run's weights before each of ",
                check.checked.size(), " steps,\ncomputed that step's gradient on the same samples: "
                "max |g_dp - g_single| / max |g_single| = ", fmt(check.difference, 3), "\n(step by step: whole runs "
                "compared only at their end drift apart once a ReLU input\nsits within rounding of 0; see "
                "dpt/step_check.h)"));
  }

  // ---- 5. Summary and verdicts (the harness adds held-out accuracy and the step check, then prints)
  ch03::add_summary_rows(lec.summary, ctx, o, run);  // checks.cpp
  ch03::add_verdicts(lec.verdicts, ctx, o, run, {gradient_bytes, start_spread, spread});
}

// ----------------------------------------------------------------------------
// 3. this run's count first; then, once it is what the average needs (so the
// page's prediction is answered by the student's own run, not before it), the
// theory for a few world sizes, with the measurement in its own size's row

void report_host_traffic(const Context& ctx, const Options& o, const Narrator& say, double gradient_bytes,
                         double measured) {
  say.say("the traffic log counted " + format_bytes(measured) + " per step through the host, with " +
          std::to_string(ctx.world) + " ranks and S = " + format_bytes(gradient_bytes) + " of gradients");
  if (measured != 2.0 * (ctx.world - 1) * gradient_bytes) {
    say.say("not what the average needs (the verdict below says by how much): how many messages must rank 0\n"
            "receive, and how many send? (docs/ch03_naive_dp.md, the hints for host_average_gradients)");
    return;
  }
  std::set<int> sizes = {1, 2, 4, 8, 16, 64};
  sizes.insert(ctx.world);
  Table table("host traffic per step (S = " + format_bytes(gradient_bytes) + " of gradients)",
              {"ranks N", "through the host: 2(N-1)S", "measured"});
  for (int n : sizes)
    table.add_row({std::to_string(n), format_bytes(2.0 * (n - 1) * gradient_bytes),
                   n == ctx.world ? format_bytes(measured) : "-"});
  if (!o.quiet) table.print(std::cout);
  say.say("Every gradient byte goes up to the host and comes back down: the host's link\n"
          "carries 2(N-1)S per step and grows with N, while each rank's own link sits idle.");
}

// ----------------------------------------------------------------------------
// flags, then the lecture on every rank

int main(int argc, char** argv) {
  Chapter chapter{"ch03_naive_dp", "naive data parallel: replicas, shards, averaging on the host"};
  chapter.batch_norm_flag = true;  // --batchnorm local|sync: the lesson of section 5
  chapter.default_ranks = 4;  // the page's first command: a bare run's verdicts can fail
  return run_chapter(argc, argv, chapter, nullptr, lecture);
}
