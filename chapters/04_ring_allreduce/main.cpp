// ch04_ring_allreduce — ring all-reduce: scatter-reduce, then all-gather.
//
// What it teaches: how N ranks can average S bytes of gradients when each
// talks only to its neighbour. The vector is cut into N chunks; in N−1
// scatter-reduce steps every chunk travels around the ring picking up one
// contribution per hop, until each rank owns one fully summed chunk; in N−1
// all-gather steps the finished chunks travel around once more. Every rank
// sends 2(N−1)/N·S bytes — about 2S whatever N is — instead of the host's
// 2(N−1)·S in chapter 03. The chapter checks your ring's sums and its traffic,
// times it, trains with it, and ends with verdicts.
//
// What it leaves out: overlapping the all-reduce with backward (chapter 05),
// trees for latency-bound sizes, and careful benchmarking (bench_allreduce:
// more sizes, memcpy as the ceiling; theory in bench/README.md).
//
// Run it:
//     build/reference/bin/ch04_ring_allreduce --ranks 3                 # explain, check, time, train
//     build/reference/bin/ch04_ring_allreduce --ranks 4 --link ethernet --trace ring.json
//     mpirun --oversubscribe -np 4 build/reference/bin/ch04_ring_allreduce --comm mpi
//
// Your holes (chapters/04_ring_allreduce/ch04.h): ch04::ring_chunk,
// ring_scatter_reduce, ring_all_gather and ring_all_reduce. The timing
// table's "naive" row runs chapter 03's host_average_gradients when you have
// written it. Exit code: 0 all verdicts ✔, 3 one ✘, 1 error.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>

#include "ch03.h"
#include "ch04.h"
#include "ch04_flags.h"
#include "checks.h"
#include "draw_ring.h"
#include "dpt/data_parallel.h"
#include "dpt/holes.h"
#include "dpt/lecture.h"
#include "dpt/timing.h"

using namespace dpt;

TrafficLog ring_traffic(Context& ctx, int64_t count);
void time_all_reduces(Context& ctx, int64_t max_bytes, int reps, bool quiet);
void ring_average(Context& ctx, std::vector<Tensor>& grads);

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates. Flags, data, the held-out
// score, the step check and printing the verdicts are the harness's (lecture.h).

void lecture(Lecture& lec, const ch04::Ch04Flags& f) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  MLP replica = make_replica(ctx, o);
  lec.keep(replica);
  if (o.steps == 0) return;
  if (ctx.world == 1)
    lec.say.say("One rank is a ring with nothing to send: the ring's verdicts below cannot fail. The default is\n"
                "--ranks 3; run --ranks 4 too.");
  // ---- 1. The ring, step by step
  if (f.explain && ctx.world <= 8) {  // every rank takes part; --quiet (which may differ) only mutes rank 0
    lec.say.section("1. The ring, step by step (" + std::to_string(ctx.world) + " ranks, one element per chunk)");
    draw_ring(ctx, lec.say.enabled());  // draw_ring.cpp: your ring, watched message by message
  }
  // ---- 2. Does it sum?
  lec.say.section("2. Does it sum? Your ring vs a serial sum, on " + std::to_string(f.check_size) + " floats");
  ch04::check_sums(ctx, lec.say, f.check_size, lec.verdicts);  // checks.cpp: each phase, then the all-reduce

  // ---- 3. Who sends to whom?
  lec.say.section("3. Who sends to whom? The traffic log of one ring all-reduce");
  TrafficLog one_call = ring_traffic(ctx, f.check_size);
  lec.say.say(one_call.to_string());
  if (ctx.is_root() && ctx.world > 1) add_ring_traffic_verdicts(lec.verdicts, one_call, 4.0 * double(f.check_size), 1, "one all-reduce");

  // ---- 4. How fast?
  lec.say.section("4. How fast? naive vs ring vs library (slowest rank, median of --reps)");
  time_all_reduces(ctx, f.max_bytes, f.reps, o.quiet);
  lec.say.say("busbw = algbw * 2(n-1)/n: the rate each rank pushes bytes (bench/README.md).");

  // ---- 5. Training with the ring
  lec.say.section("5. Training with the ring");
  DataParallelRun run = train_data_parallel(ctx, o, lec.data, replica, ring_average, "ch04 train", strided_shard,
                                            &lec.recorder);  // the recorder keeps steps for the one-device check
  double spread = replica_spread(ctx, replica);
  if (!ctx.is_root()) return;

  // ---- 6. Summary and verdicts (checks.cpp; the harness adds held-out accuracy, then prints them)
  ch04::add_training_checks(lec, run, double(replica.num_parameters()) * 4, spread);
}

// ----------------------------------------------------------------------------
// 3. the traffic log of one ring all-reduce of `count` floats (every rank's sends)

TrafficLog ring_traffic(Context& ctx, int64_t count) {
  std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  ch04::ring_all_reduce(ctx.comm, data.data(), count, ReduceOp::Sum);
  return ctx.comm.gather_traffic();
}

// ----------------------------------------------------------------------------
// 4. timing: naive (chapter 03's hole), your ring, the library's all-reduce

// Every method averages the same buffer on the rank's device (its GPU under
// --device cuda), as training does.
struct TimedAllReduce {
  std::string name;
  std::function<void(Context&, Tensor&)> call;  // data (count,) on ctx.device becomes the mean
  bool available = true;                        // false: a hole not written yet
};

void naive_average(Context& ctx, Tensor& d) {
  std::vector<Tensor> one = {d};
  ch03::host_average_gradients(ctx.comm, one);
  d = one[0];
}

void time_all_reduces(Context& ctx, int64_t max_bytes, int reps, bool quiet) {
  const int n = ctx.world;
  std::vector<TimedAllReduce> methods = {
      {"naive (ch03)", naive_average},
      {"ring (yours)", [](Context& c, Tensor& d) { ch04::ring_all_reduce(c.comm, d.data(), d.numel(), ReduceOp::Avg); }},
      {"library", [](Context& c, Tensor& d) { c.comm.all_reduce(d.data(), d.numel(), ReduceOp::Avg); }}};
  Table table("all-reduce (Avg), " + std::to_string(n) + " ranks, " + ctx.comm.backend() + ", link " +
                  effective_link(ctx.options).describe(),
              {"size", "method", "time (us)", "algbw GB/s", "busbw GB/s"});
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 8) {
    Tensor data = Tensor::full({bytes / 4}, 1.0f, ctx.device);
    for (TimedAllReduce& m : methods) {
      if (!m.available) continue;
      if (!unwritten_hole(ctx.comm, [&] { m.call(ctx, data); }).empty()) {  // the warm-up met a hole
        m.available = false;
        table.add_row({"-", m.name, "not written yet", "-", "-"});
        continue;
      }
      std::vector<double> times;
      for (int i = 0; i < reps; ++i) times.push_back(time_window(ctx.comm, [&] { m.call(ctx, data); }, 1));
      double t = median(times), algbw = double(bytes) / t / 1e9;
      table.add_row({format_bytes(double(bytes)), m.name, fixed(t * 1e6, 1), fixed(algbw, 2),
                     fixed(algbw * 2.0 * (n - 1) / n, 2)});
    }
  }
  if (ctx.is_root() && !quiet) table.print(std::cout);
}

// ----------------------------------------------------------------------------
// 5. the gradient sync chapter 04 plugs into the core's loop: one ring
// all-reduce (Avg) over all gradients, flattened on the rank's device (its
// GPU under --device cuda: the ring's adds run there, nothing goes through
// the host)

void ring_average(Context& ctx, std::vector<Tensor>& grads) {
  Tensor flat = flatten_on(grads, ctx.device);  // (Ψ,)
  ch04::ring_all_reduce(ctx.comm, flat.data(), flat.numel(), ReduceOp::Avg);
  unflatten(flat, grads);
}

// ----------------------------------------------------------------------------
// flags, then the lecture on every rank

int main(int argc, char** argv) {
  ch04::Ch04Flags f;
  auto flags = [&f](CLI::App& app, Options&) { ch04::add_ch04_flags(app, f); };  // ch04_flags.cpp
  Chapter chapter{"ch04_ring_allreduce", "ring all-reduce: scatter-reduce + all-gather"};
  chapter.default_ranks = 3;  // the page's first command: dividing by 3 is not exact, so Avg's roundings show
  return run_chapter(argc, argv, chapter, flags, [&f](Lecture& lec) { lecture(lec, f); });
}
