// ch04_ring_allreduce — ring all-reduce: scatter-reduce, then all-gather.
//
// What it teaches: how N ranks can average S bytes of gradients when each
// talks only to its neighbour. The vector is cut into N chunks; in N−1
// scatter-reduce steps every chunk travels around the ring picking up one
// contribution per hop, until each rank owns one fully summed chunk; in N−1
// all-gather steps the finished chunks travel around once more. Every rank
// sends 2(N−1)/N·S bytes — about 2S whatever N is — instead of the host's
// 2(N−1)·S in chapter 03. Then the chapter trains with it and measures it.
//
// What it leaves out: overlapping the all-reduce with backward (chapter 05),
// trees and hierarchical rings for latency-bound sizes.
//
// Run it:
//     build/reference/bin/ch04_ring_allreduce --ranks 4                 # explain, measure, train
//     build/reference/bin/ch04_ring_allreduce --ranks 4 --link ethernet --trace ring.json
//     mpirun -np 4 build/reference/bin/ch04_ring_allreduce --comm mpi
//
// Your holes: dpt::ch04::ring_scatter_reduce and dpt::ch04::ring_all_gather.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>

#include "ch03_holes.h"
#include "ch04_holes.h"
#include "data_parallel.h"
#include "dpt/report.h"

using namespace dpt;

// ----------------------------------------------------------------------------
// 1. --explain: watch the ring work on a tiny vector

// Rank r contributes 2^r to every element, so an element's value, read as a
// bit mask, says exactly whose contributions it already sums.
std::string contributors(float value, int world) {
  auto mask = static_cast<uint64_t>(value);
  if (mask == (uint64_t(1) << world) - 1) return "all";
  std::string out;
  for (int r = 0; r < world; ++r)
    if (mask & (uint64_t(1) << r)) out += (out.empty() ? "" : "+") + std::to_string(r);
  return out;
}

void explain(Context& ctx) {
  const int n = ctx.world;
  std::vector<float> data(std::size_t(n), float(uint64_t(1) << ctx.rank));  // one element per chunk
  std::vector<float> before = data;
  auto draw = [&](const char* phase, int step) {
    std::vector<float> all(std::size_t(n) * n);  // every rank's vector, gathered to draw it
    ctx.comm.all_gather(data.data(), all.data(), n);
    std::vector<float> all_before(std::size_t(n) * n);
    ctx.comm.all_gather(before.data(), all_before.data(), n);
    before = data;
    if (!ctx.is_root()) return;
    std::vector<std::string> headers = {std::string(phase) + " step " + std::to_string(step + 1) + "/" + std::to_string(n - 1)};
    for (int c = 0; c < n; ++c) headers.push_back("chunk " + std::to_string(c));
    Table grid("", headers);
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> row = {"rank " + std::to_string(r)};
      for (int c = 0; c < n; ++c) {
        float v = all[std::size_t(r) * n + c];
        bool changed = v != all_before[std::size_t(r) * n + c];  // * = received this step
        row.push_back(contributors(v, n) + (changed ? " *" : "  "));
      }
      grid.add_row(row);
    }
    std::cout << grid.str().substr(1);
  };
  if (ctx.is_root())
    std::cout << "Each cell lists whose contributions a rank's copy of a chunk sums; * marks\n"
                 "what arrived from the left neighbour in this step.\n\n";
  ch04::ring_all_reduce(ctx.comm, data.data(), n, ReduceOp::Sum, draw);
}

// ----------------------------------------------------------------------------
// 2. correctness and speed: naive vs ring vs the library

using AllReduce = std::function<void(Context&, std::vector<float>&)>;

// Median seconds of `reps` runs of `all_reduce` on `count` floats, all ranks in step.
double time_all_reduce(Context& ctx, const AllReduce& all_reduce, int64_t count, int reps) {
  std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
  std::vector<double> times;
  for (int i = 0; i < reps + 1; ++i) {  // +1: a warm-up run
    ctx.comm.barrier();
    auto start = std::chrono::steady_clock::now();
    all_reduce(ctx, data);
    double local = seconds_since(start);
    float slowest = float(local);  // an all-reduce is done when its slowest rank is
    ctx.comm.all_reduce(&slowest, 1, ReduceOp::Sum);
    if (i > 0) times.push_back(local);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void measure(Context& ctx, int64_t max_bytes, int reps, bool quiet) {
  const int n = ctx.world;
  std::map<std::string, AllReduce> methods = {
      {"1 naive (host)", [](Context& c, std::vector<float>& d) {
         std::vector<Tensor> one = {Tensor::from_vector({int64_t(d.size())}, d, c.device)};
         ch03::host_average_gradients(c.comm, one);
         d = one[0].to_vector();
       }},
      {"2 ring (yours)", [](Context& c, std::vector<float>& d) {
         ch04::ring_all_reduce(c.comm, d.data(), int64_t(d.size()), ReduceOp::Avg);
       }},
      {"3 library", [](Context& c, std::vector<float>& d) {
         c.comm.all_reduce(d.data(), int64_t(d.size()), ReduceOp::Avg);
       }}};
  LinkModel link = effective_link(ctx.options);
  Table table("all-reduce (Avg), " + std::to_string(n) + " ranks, " + ctx.comm.backend() + ", link " + link.describe() +
                  "; busbw = algbw * 2(n-1)/n",
              {"size", "method", "time (us)", "algbw GB/s", "busbw GB/s", "busiest rank sends (theory)",
               "alpha-beta model (us)"});
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 8) {
    int64_t count = bytes / 4;
    for (auto& [name, fn] : methods) {
      double t = time_all_reduce(ctx, fn, count, reps);
      double algbw = double(bytes) / t / 1e9;
      double busbw = algbw * 2.0 * (n - 1) / n;
      // Ring: 2(n-1) dependent steps of alpha + (S/n)/beta. Naive: the host's
      // port takes (n-1)·S in, then sends (n-1)·S out; the messages of each
      // phase queue on the port, their latencies overlap: 2(alpha + (n-1)S/beta).
      double alpha = link.latency_us * 1e-6;
      double model = name[0] == '2' ? 2.0 * (n - 1) * (alpha + link.transfer_seconds(bytes / n))
                   : name[0] == '1' ? 2.0 * (alpha + (n - 1) * link.transfer_seconds(bytes))
                                    : -1;
      // Ring: every rank 2(n-1)/n·S. Naive: the host sends the mean to n-1 ranks.
      double sends = name[0] == '2' ? 2.0 * (n - 1) / n * double(bytes) : name[0] == '1' ? (n - 1) * double(bytes) : -1;
      table.add_row({format_bytes(double(bytes)), name.substr(2), fixed(t * 1e6, 1), fixed(algbw, 2), fixed(busbw, 2),
                     sends >= 0 ? format_bytes(sends) : "-", link.enabled() && model >= 0 ? fixed(model * 1e6, 1) : "-"});
    }
  }
  if (ctx.is_root() && !quiet) table.print(std::cout);
}

// Checks the ring against the library on `count` random floats; returns max |difference|.
double check_against_library(Context& ctx, int64_t count) {
  Rng rng(1234 + uint64_t(ctx.rank));
  std::vector<float> mine(static_cast<std::size_t>(count));
  for (float& v : mine) v = rng.normal();
  std::vector<float> library = mine;
  ch04::ring_all_reduce(ctx.comm, mine.data(), count, ReduceOp::Sum);
  ctx.comm.all_reduce(library.data(), count, ReduceOp::Sum);
  float worst = 0;
  for (int64_t i = 0; i < count; ++i) worst = std::max(worst, std::abs(mine[i] - library[i]));
  ctx.comm.all_reduce(&worst, 1, ReduceOp::Sum);  // any rank's error counts
  return worst;
}

// ----------------------------------------------------------------------------
// 3. the lecture, run by every rank

struct Ch04Flags {
  bool explain = true, verify = true;
  int64_t check_size = 1000003;
  int64_t max_bytes = 16 << 20;
  int reps = 5;
};

void run_rank(Context& ctx, const Options& o, const Ch04Flags& f) {
  Narrator say(ctx.is_root() && !o.quiet);
  Dataset data = load_dataset(o);
  MLP replica = ch03::make_replica(ctx, o);
  if (o.steps == 0) {
    if (ctx.is_root()) save_outputs(o, replica, data);
    return;
  }
  if (f.explain && !o.quiet && ctx.world <= 8) {
    say.section("1. The ring, step by step (" + std::to_string(ctx.world) + " ranks, one element per chunk)");
    explain(ctx);
  }
  say.section("2. Does it sum? Ring vs the library on " + std::to_string(f.check_size) + " floats");
  double error = check_against_library(ctx, f.check_size);
  say.say("max |ring - library| = " + fmt(error, 3) + " (float sums in another order)");

  say.section("3. How fast? naive vs ring vs library");
  measure(ctx, f.max_bytes, f.reps, o.quiet);

  say.section("4. Training with the ring");
  auto average = [](Context& c, std::vector<Tensor>& grads) {
    std::vector<float> flat = ch03::flatten(grads);  // one all-reduce for all gradients
    ch04::ring_all_reduce(c.comm, flat.data(), int64_t(flat.size()), ReduceOp::Avg);
    ch03::unflatten(flat, grads);
  };
  TrafficLog& traffic = ctx.comm.traffic();
  ctx.comm.barrier();
  traffic.clear();  // count only the training's messages below
  ctx.comm.barrier();
  ch03::DataParallelRun run = ch03::train_data_parallel(ctx, o, data, replica, average, "ch04 train");
  TrafficLog all = ctx.comm.gather_traffic();
  if (ctx.is_root()) save_outputs(o, replica, data);
  if (!ctx.is_root()) return;

  double s = double(replica.num_parameters()) * 4;
  say.say("who sent to whom during training: each rank only to its right neighbour");
  say.say(all.to_string());
  int64_t busiest = 0;
  for (int r = 0; r < ctx.world; ++r) busiest = std::max(busiest, all.bytes_sent(r));
  double difference = f.verify ? ch03::single_device_difference(o, data, ctx.world, replica) : -1;
  Table summary("ch04 summary", {"what", "value"});
  summary.add_row({"ranks x batch per rank", std::to_string(ctx.world) + " x " + std::to_string(o.batch)});
  summary.add_row({"ring vs library all-reduce, max |difference|", fmt(error, 3)});
  summary.add_row({"loss: first step -> last step", fixed(run.losses.front(), 4) + " -> " + fixed(run.losses.back(), 4)});
  summary.add_row({"per rank per step: measured / 2(n-1)/n*S", format_bytes(double(busiest) / double(o.steps)) + " / " +
                                                                  format_bytes(2.0 * (ctx.world - 1) / ctx.world * s)});
  summary.add_row({"ch03's host carried per step: 2(n-1)*S", format_bytes(2.0 * (ctx.world - 1) * s)});
  summary.add_row({"time (compute / averaging on rank 0)", fixed(run.seconds, 2) + " s (" + fixed(run.compute_seconds, 2) +
                                                              " / " + fixed(run.comm_seconds, 2) + " s)"});
  summary.add_row({"max |w - w_single-device|", f.verify ? fmt(difference, 3) : "not checked (--no-verify)"});
  summary.print(std::cout);
}

int main(int argc, char** argv) {
  CLI::App app{"ch04_ring_allreduce — ring all-reduce: scatter-reduce + all-gather", "ch04_ring_allreduce"};
  Options options;
  LaunchOptions launch_options;
  Ch04Flags flags;
  add_common_flags(app, options);
  add_launch_flags(app, launch_options);
  ch03::add_data_parallel_flags(app, flags.verify);
  app.add_flag("--explain,!--no-explain", flags.explain, "Draw the ring step by step on a tiny vector (up to 8 ranks)")
      ->capture_default_str();
  app.add_option("--check-size", flags.check_size, "Floats in the ring-vs-library check")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--max-bytes", flags.max_bytes, "Largest all-reduce measured (4 KiB, x8, … up to this)")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--reps", flags.reps, "Timed repetitions per size (median)")->check(positive_integer())->capture_default_str();
  parse_flags(app, argc, argv);
  return run_guarded("ch04_ring_allreduce", [&] {
    launch(launch_options, [&](Context& ctx) { run_rank(ctx, options, flags); });
  });
}
