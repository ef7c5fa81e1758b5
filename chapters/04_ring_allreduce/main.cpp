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
#include <cmath>
#include <cstdint>
#include <iostream>

#include "ch03.h"
#include "ch04.h"
#include "draw_ring.h"
#include "dpt/comm/watch.h"
#include "dpt/data_parallel.h"
#include "dpt/lecture.h"
#include "dpt/timing.h"

using namespace dpt;

struct Ch04Flags {
  bool explain = true;
  int64_t check_size = 1000003;
  int64_t max_bytes = 16 << 20;
  int reps = 5;
};

void check_sums(Context& ctx, const Narrator& say, int64_t count, Verdicts& v);
TrafficLog ring_traffic(Context& ctx, int64_t count);
void time_all_reduces(Context& ctx, int64_t max_bytes, int reps, bool quiet);
void ring_average(Context& ctx, std::vector<Tensor>& grads);

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates. Flags, data, the held-out
// score, the step check and printing the verdicts are the harness's (lecture.h).

void lecture(Lecture& lec, const Ch04Flags& f) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  MLP replica = make_replica(ctx, o);
  lec.keep(replica);
  if (o.steps == 0) return;
  if (ctx.world == 1)
    lec.say.say("One rank (the default) is a ring with nothing to send: every verdict below holds whatever your\n"
                "ring does. Run --ranks 3, then --ranks 4, to see it.");
  // ---- 1. The ring, step by step
  if (f.explain && ctx.world <= 8) {  // every rank takes part; --quiet (which may differ) only mutes rank 0
    lec.say.section("1. The ring, step by step (" + std::to_string(ctx.world) + " ranks, one element per chunk)");
    draw_ring(ctx, lec.say.enabled());  // draw_ring.cpp: your ring, watched message by message
  }
  // ---- 2. Does it sum?
  lec.say.section("2. Does it sum? Your ring vs a serial sum, on " + std::to_string(f.check_size) + " floats");
  check_sums(ctx, lec.say, f.check_size, lec.verdicts);

  // ---- 3. Who sends to whom?
  lec.say.section("3. Who sends to whom? The traffic log of one ring all-reduce");
  TrafficLog one_call = ring_traffic(ctx, f.check_size);
  lec.say.say(one_call.to_string());
  if (ctx.is_root()) add_ring_traffic_verdicts(lec.verdicts, one_call, 4.0 * double(f.check_size), 1, "one all-reduce");

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
  const double s = double(replica.num_parameters()) * 4;
  add_ring_traffic_verdicts(lec.verdicts, run.traffic, s, int64_t(run.losses.size()), "training");
  lec.verdicts.holds("the loss stayed finite", run.diverged_step < 0,
                     run.diverged_step < 0 ? "" : "not at step " + std::to_string(run.diverged_step));
  lec.verdicts.at_most("replicas identical: max |w_r - w_0|", spread, 0, "the all-gather copies the same bits everywhere");

  // ---- 6. Summary (the harness adds held-out accuracy, then prints it and the verdicts)
  Table& summary = lec.summary;
  summary.add_row({"ranks x batch per rank", str(ctx.world, " x ", o.batch)});
  summary.add_row({"loss: first step -> last step", fixed(run.losses.front(), 4) + " -> " + fixed(run.losses.back(), 4)});
  summary.add_row({"per rank per step, theory 2(n-1)/n*S", format_bytes(2.0 * (ctx.world - 1) / ctx.world * s)});
  summary.add_row({"ch03's host carried per step: 2(n-1)*S", format_bytes(2.0 * (ctx.world - 1) * s)});
  summary.add_row({"time (compute / averaging on rank 0)", fixed(run.seconds, 2) + " s (" + fixed(run.compute_seconds, 2) +
                                                              " / " + fixed(run.sync_seconds, 2) + " s)"});
}

// ----------------------------------------------------------------------------
// 2. the sums: inputs are small integers, so the serial sum is exact in any
// order and every rank can compute it on its own, sharing no code with the
// ring. The ring runs on the rank's device, where training runs it.

float check_input(int rank, int64_t i) { return float((rank + 1) * 1000 + i % 997); }

// Runs the ring with `op` on every rank's inputs; returns the largest error
// relative to max(1, |expected|) over all ranks and elements (NaN-aware).
// With Avg it also watches the ring's messages (dpt/comm/watch.h): when rank
// r's n-th send leaves, the first of its all-gather (each phase sends n−1),
// the chunk it owns must already hold what every rank ends with, and every
// other chunk still what your scatter-reduce alone leaves there (each rank
// divides its own chunk's floats only). `misplaced` counts the elements that
// did not (the worst rank's count). That message must also carry the chunk
// the rank finished: `first_sent` says, on the root, which one it carried when
// a rank's did not (empty when every rank's did, or none was watched).
double ring_error(Context& ctx, int64_t count, ReduceOp op, double* misplaced = nullptr,
                  std::string* first_sent = nullptr) {
  std::vector<float> data(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = check_input(ctx.rank, i);
  Tensor on_device = Tensor::from_vector({count}, data, ctx.device);
  const int n = ctx.world;
  std::vector<float> reduced;  // what the scatter-reduce alone leaves: the other chunks' reference
  if (misplaced) {
    Tensor alone = Tensor::from_vector({count}, data, ctx.device);
    ch04::ring_scatter_reduce(ctx.comm, alone.data(), count);
    reduced = alone.to_vector();
  }
  const Range own = ch04::ring_chunk(count, n, (ctx.rank + 1) % n);
  std::vector<float> at_send;  // the whole vector as the first all-gather message left
  int64_t sent_begin = own.begin, sent_count = own.size();  // and the floats it carried
  int sends = 0;
  auto watched = watch_messages(ctx.comm, [&](const Message& m) {
    if (m.dst < 0 || sends++ != n - 1) return;
    at_send = on_device.to_vector();
    // Judged only when it was sent from the vector itself (not from a copy).
    auto at = [](const float* f) { return int64_t(reinterpret_cast<std::uintptr_t>(f) / sizeof(float)); };
    const int64_t begin = at(m.send_data) - at(on_device.data());
    if (begin < 0 || begin + m.send_count > count) return;
    sent_begin = begin;
    sent_count = m.send_count;
  });
  ch04::ring_all_reduce(*watched, on_device.data(), count, op);
  data = on_device.to_vector();
  double worst = 0;
  for (int64_t i = 0; i < count; ++i) {
    double expected = 0;
    for (int r = 0; r < ctx.world; ++r) expected += check_input(r, i);
    if (op == ReduceOp::Avg) expected /= ctx.world;
    double error = std::fabs(data[std::size_t(i)] - expected) / std::max(1.0, std::fabs(expected));
    if (!(error <= worst)) worst = error;  // a NaN stays
  }
  if (misplaced) {
    double wrong = 0;  // a rank that sent fewer than n messages was never watched: every element counts
    for (int64_t i = 0; i < count; ++i) {
      const std::size_t k = std::size_t(i);
      const float expected = i >= own.begin && i < own.end ? data[k] : reduced[k];
      wrong += k < at_send.size() && at_send[k] == expected ? 0 : 1;
    }
    *misplaced = max_over_ranks(ctx.comm, n > 1 ? wrong : 0);
  }
  if (first_sent) {
    const bool other = sent_begin != own.begin || sent_count != own.size();
    const bool any = max_over_ranks(ctx.comm, other ? 1.0 : 0.0) > 0;
    first_sent->clear();
    if (any && !other) *first_sent = "another rank's did not";
    if (other) {
      std::string which = "floats [" + std::to_string(sent_begin) + ", " + std::to_string(sent_begin + sent_count) + ")";
      for (int c = 0; c < n; ++c)
        if (ch04::ring_chunk(count, n, c).begin == sent_begin && ch04::ring_chunk(count, n, c).size() == sent_count)
          which = "chunk " + std::to_string(c);
      *first_sent = "rank " + std::to_string(ctx.rank) + "'s carried " + which + ", not chunk " +
                    std::to_string((ctx.rank + 1) % n) +
                    ", the one its scatter-reduce finished";
    }
  }
  return max_over_ranks(ctx.comm, worst);
}

void check_sums(Context& ctx, const Narrator& say, int64_t count, Verdicts& v) {
  double misplaced = 0;
  std::string first_sent;
  double sum_error = ring_error(ctx, count, ReduceOp::Sum),
         avg_error = ring_error(ctx, count, ReduceOp::Avg, &misplaced, &first_sent);
  if (!ctx.is_root()) return;
  say.say("largest relative error on any rank: Sum " + fmt(sum_error, 3) + ", Avg " + fmt(avg_error, 3) +
          " (inputs are integers, so the serial sum is exact; verdicts at the end)");
  v.at_most("ring Sum = serial sum, max relative error", sum_error, 0,
            "integers below 2^24 add exactly in any order: any error is a wrong chunk or a missed contribution");
  v.at_most("ring Avg = serial mean, max relative error", avg_error, 6e-8,
            "the exact sum divided by n once: one rounding, <= 2^-24 relative; inputs divided before the sum (n "
            "roundings) or the sum times fl(1/n) (two) may exceed it; at n = 4 both are exact: check with --ranks 3");
  v.holds("ring all-gather: each rank's first message carries a chunk it has finished", first_sent.empty(),
          first_sent + (first_sent.empty() ? "" : " (where Avg divides is judged once this holds)"));
  if (!first_sent.empty()) return;  // the division's watch below would blame the division
  v.at_most("ring Avg, as each rank's all-gather began: floats of its own chunk not yet the mean, or of other "
            "chunks divided too (worst rank)",
            misplaced, 0,
            "watched as the first all-gather message left (ch04.h: each rank divides its share, about count/n "
            "floats): sums sent and divided by every rank afterwards, or every chunk divided, end right but show "
            "here");
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
      try {
        m.call(ctx, data);  // warm-up; a hole throws NotImplemented on every rank, before any message
      } catch (const NotImplemented&) {
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
  Ch04Flags f;
  auto flags = [&f](CLI::App& app, Options&) {
    app.add_flag("--explain,!--no-explain", f.explain, "Draw the ring step by step on a tiny vector (up to 8 ranks)")
        ->capture_default_str();
    app.add_option("--check-size", f.check_size, "Floats in the sum and traffic checks")
        ->check(positive_integer())->capture_default_str();
    app.add_option("--max-bytes", f.max_bytes, "Largest all-reduce timed (4 KiB, x8, … up to this)")
        ->check(positive_integer())->capture_default_str();
    app.add_option("--reps", f.reps, "Timed repetitions per size (median)")->check(positive_integer())->capture_default_str();
  };
  return run_chapter(argc, argv, {"ch04_ring_allreduce", "ring all-reduce: scatter-reduce + all-gather"}, flags,
                     [&f](Lecture& lec) { lecture(lec, f); });
}
