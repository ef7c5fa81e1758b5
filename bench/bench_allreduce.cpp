// bench_allreduce — the chapters' all-reduces against the library's, and
// against memcpy, in nccl-tests' shape: one small struct per algorithm, one
// harness that checks and times them all, the algbw/busbw theory in
// bench/README.md (the code only applies busbw = algbw · 2(n−1)/n).
//
// For each message size S (4 KiB … 256 MiB, ×4) and each world of n ranks it
// prints, side by side in one run:
//   naive        chapter 03's host_average_gradients on one flat tensor
//                (gather to rank 0, average, send back);
//   ring         chapter 04's ring_all_reduce (Avg): the exercise;
//   ring pieced  beyond the exercise: the same ring moving each chunk in
//                cache-sized pieces (ring_pieced.h), same peers and bytes
//                (instructor's repository only: not in a student handout);
//   library      comm.all_reduce (Avg): the backend's own collective (under
//                --comm mpi, Open MPI's all-reduce, then ÷n);
//   memcpy       every rank copying S bytes between two buffers of its own,
//                all at once: the memory-bandwidth ceiling (bench/README.md);
// each as time, algbw = S / t and busbw, then ring / library, pieced / ring
// and ring / memcpy (bandwidth ratios: above 1 the first is faster).
//
// --set ch08 times chapter 08's all-reduces instead: ring, recursive
// doubling, halving-doubling, binomial tree and two-level (--nodes K), each
// a sum then ÷n, beside the library's, with each one's busbw / library's.
//
// Checking: per size, every algorithm runs once on inputs rank+1 and must
// match the library's all-reduce of the same inputs (the oracle under every
// backend) to a few ulp. A hole that throws NotImplemented (student build) is
// skipped, not the bench.
// Timing: then one more warm-up call, which also sets how many calls make a
// ~20 ms window; then `--reps` rounds, each timing one window of every
// algorithm in turn (interleaved, so a noisy neighbour slows all alike). A
// window lasts from the first rank's start to the last rank's end
// (dpt::time_window, the slowest-rank timer chapter 04 uses too); the median
// window is reported.
//
// Run it:
//     build/reference/bin/bench_allreduce                          # threads, 2 and 4 ranks
//     build/reference/bin/bench_allreduce --ranks 4 --max-bytes 64M --json ar.json
//     mpirun -np 2 build/reference/bin/bench_allreduce --comm mpi
//     mpirun -np 4 --oversubscribe build/reference/bin/bench_allreduce --comm mpi
//     mpirun -np 8 --oversubscribe build/reference/bin/bench_allreduce --comm mpi --set ch08 --nodes 2
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ch03.h"
#include "ch04.h"
#include "dpt/floats.h"
#include "cost_model.h"
#include "sweep.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/timing.h"
#include "machine.h"
#ifdef DPT_BENCH_PIECED
#include "ring_pieced.h"  // instructor's repository only (bench/CMakeLists.txt)
#endif

using namespace dpt;

constexpr double kWindowSeconds = 0.02;  // target length of one timing window
constexpr int64_t kMaxCallsPerWindow = 10000;

// ----------------------------------------------------------------------------
// one struct per algorithm

// The buffers of one message size on one rank: `data` is reduced in place
// (`grad` is the same floats as a tensor on the rank's device, for naive);
// memcpy copies copy_from to copy_to.
struct Buffers {
  Buffers(Context& ctx, int64_t n) : count(n), data(std::size_t(n)), copy_from(std::size_t(n), 1.0f),
                                     copy_to(std::size_t(n)), grad(Tensor::empty({n}, ctx.device)) {}
  int64_t count;
  std::vector<float> data, copy_from, copy_to;
  Tensor grad;
};

// One algorithm under test: how to run it once, and whether its result is an
// all-reduce (checked against the library) or a copy (not checked).
struct Algorithm {
  Algorithm(std::string algorithm_name, std::function<void(Context&, Buffers&)> fn, bool is_reduction = true)
      : name(std::move(algorithm_name)), call(std::move(fn)), reduces(is_reduction) {}
  std::string name;
  std::function<void(Context&, Buffers&)> call;
  bool reduces = true;
  bool available = true;         // false: a hole that throws NotImplemented
  int64_t calls = 1;             // per window, the same on every rank
  std::vector<double> per_call;  // seconds per call, one entry per window
};

// The pieced ring is a chapter 04 solution: the instructor's repository has
// it, a student handout does not (bench/CMakeLists.txt).
#ifdef DPT_BENCH_PIECED
constexpr bool has_pieced = true;
#else
constexpr bool has_pieced = false;
#endif

// --set and --nodes: which algorithms run, and chapter 08's node count.
std::string g_set = "ch04";
int g_nodes = 1;

// Chapter 08's algorithm `name`, as a mean: its sum, then each element ÷ n.
Algorithm ch08_algorithm(const std::string& name) {
  return {name, [name](Context& ctx, Buffers& b) {
            ch08::run_algorithm(name, ctx.comm, b.data.data(), b.count, g_nodes);
            divide_floats(b.data.data(), b.count, float(ctx.world));
          }};
}

std::vector<Algorithm> algorithms() {
  if (g_set == "ch08") {
    std::vector<Algorithm> all;
    for (const char* name : {"ring", "recursive doubling", "halving-doubling", "binomial tree", "two-level"})
      all.push_back(ch08_algorithm(name));
    all.push_back({"library", [](Context& ctx, Buffers& b) { ctx.comm.all_reduce(b.data.data(), b.count, ReduceOp::Avg); }});
    return all;
  }
  std::vector<Algorithm> all = {
      {"naive", [](Context& ctx, Buffers& b) {
         std::copy(b.data.begin(), b.data.end(), b.grad.data());
         std::vector<Tensor> grads = {b.grad};
         ch03::host_average_gradients(ctx.comm, grads);
         std::copy(b.grad.data(), b.grad.data() + b.count, b.data.begin());
       }},
      {"ring", [](Context& ctx, Buffers& b) { ch04::ring_all_reduce(ctx.comm, b.data.data(), b.count, ReduceOp::Avg); }},
      {"library", [](Context& ctx, Buffers& b) { ctx.comm.all_reduce(b.data.data(), b.count, ReduceOp::Avg); }},
      {"memcpy", [](Context&, Buffers& b) { std::memcpy(b.copy_to.data(), b.copy_from.data(), 4 * std::size_t(b.count)); },
       false}};
#ifdef DPT_BENCH_PIECED
  all.insert(all.begin() + 2, Algorithm{"ring pieced", [](Context& ctx, Buffers& b) {
                                 dpt_bench::pieced_ring_all_reduce(ctx.comm, b.data.data(), b.count, ReduceOp::Avg); }});
#endif
  return all;
}

// ----------------------------------------------------------------------------
// the harness: check, then time, every algorithm on one size (every rank)

// Inputs rank+1 everywhere; the oracle is the library's all-reduce of the same
// inputs. Both sums are of small integers (exact in any order); Avg then
// rounds once or twice, hence 4 ulp of the mean.
void check(Context& ctx, Algorithm& a, Buffers& b, const std::vector<float>& oracle) {
  std::fill(b.data.begin(), b.data.end(), float(ctx.rank + 1));
  try {
    a.call(ctx, b);
  } catch (const NotImplemented&) {  // thrown on every rank at entry, before any message
    a.available = false;
    return;
  }
  if (!a.reduces) return;
  for (int64_t i = 0; i < b.count; ++i)
    DPT_CHECK(std::fabs(b.data[std::size_t(i)] - oracle[std::size_t(i)]) <= 4.8e-7f * oracle[std::size_t(i)],
              a.name << " all-reduce of " << b.count << " floats on " << ctx.world << " ranks: element " << i << " is "
                     << b.data[std::size_t(i)] << ", the library says " << oracle[std::size_t(i)]);
}

void measure(Context& ctx, std::vector<Algorithm>& all, Buffers& b, int reps) {
  for (Algorithm& a : all) {
    if (!a.available) continue;
    double t = time_window(ctx.comm, [&] { a.call(ctx, b); }, 1);
    a.calls = std::clamp<int64_t>(int64_t(kWindowSeconds / std::max(t, 1e-9)), 1, kMaxCallsPerWindow);
  }
  for (int r = 0; r < reps; ++r)
    for (Algorithm& a : all)
      if (a.available) a.per_call.push_back(time_window(ctx.comm, [&] { a.call(ctx, b); }, a.calls));
}

std::vector<Algorithm> run_size(Context& ctx, int64_t count, int reps) {
  Buffers b(ctx, count);
  std::vector<float> oracle(std::size_t(count), float(ctx.rank + 1));
  ctx.comm.all_reduce(oracle.data(), count, ReduceOp::Avg);
  std::vector<Algorithm> all = algorithms();
  for (Algorithm& a : all) check(ctx, a, b, oracle);
  measure(ctx, all, b, reps);  // reduces equal values from here on: they stay put
  return all;
}

// ----------------------------------------------------------------------------
// results: a table row and a JSON object per size

struct Row {
  nlohmann::json json;
  std::vector<std::string> cells;
};

// Cells and JSON of one algorithm; returns its busbw in GB/s (0: not run).
// memcpy's bandwidth is S / t of one rank's copy (no busbw factor).
double add_algorithm(Row& row, Algorithm& a, int64_t bytes, int world) {
  if (!a.available || a.per_call.empty()) {
    row.cells.resize(row.cells.size() + (a.reduces ? 3 : 1), "-");
    row.json[a.name] = nullptr;
    return 0;
  }
  double t = median(a.per_call), algbw = double(bytes) / t / 1e9;
  if (!a.reduces) {
    row.cells.push_back(fixed(algbw, 2));
    row.json[a.name] = {{"time_us", t * 1e6}, {"gbps", algbw}};
    return algbw;
  }
  double busbw = algbw * 2.0 * (world - 1) / world;
  row.cells.insert(row.cells.end(), {fixed(t * 1e6, 1), fixed(algbw, 2), fixed(busbw, 2)});
  row.json[a.name] = {{"time_us", t * 1e6}, {"algbw_gbps", algbw}, {"busbw_gbps", busbw}, {"calls_per_window", a.calls}};
  return busbw;
}

void add_ratio(Row& row, const std::string& key, double a, double b) {
  bool both = a > 0 && b > 0;
  row.cells.push_back(both ? fixed(a / b, 2) : "-");
  row.json[key] = both ? nlohmann::json(a / b) : nlohmann::json();
}

std::vector<std::string> headers() {
  std::vector<std::string> h = {"size", "count"};
  for (const Algorithm& a : algorithms()) {
    if (!a.reduces) h.push_back(a.name + " GB/s");
    else h.insert(h.end(), {a.name + " us", "algbw", "busbw"});
  }
  if (g_set == "ch08") {
    for (const Algorithm& a : algorithms())
      if (a.name != "library") h.push_back(std::string(1, ch08::algorithm_letter(a.name)) + "/lib");
    return h;
  }
  h.push_back("ring/library");
  if (has_pieced) h.push_back("pieced/ring");
  h.push_back("ring/memcpy");
  return h;
}

Row result_row(std::vector<Algorithm>& all, int64_t count, int world) {
  Row row;
  int64_t bytes = 4 * count;
  row.json = {{"bytes", bytes}, {"count", count}};
  row.cells = {format_bytes(double(bytes)), std::to_string(count)};
  std::map<std::string, double> bw;
  for (Algorithm& a : all) bw[a.name] = add_algorithm(row, a, bytes, world);
  if (g_set == "ch08") {
    for (Algorithm& a : all)
      if (a.name != "library") add_ratio(row, a.name + "_over_library", bw[a.name], bw["library"]);
    return row;
  }
  add_ratio(row, "ring_over_library", bw["ring"], bw["library"]);
  if (has_pieced) add_ratio(row, "pieced_over_ring", bw["ring pieced"], bw["ring"]);
  add_ratio(row, "ring_busbw_over_memcpy", bw["ring"], bw["memcpy"]);
  return row;
}

// Runs every size on one world (all ranks); rank 0 prints the table. Returns
// {"ranks": n, "results": [a row per size]} (rows only on rank 0).
nlohmann::json run_world(const LaunchOptions& launch_options, int64_t min_bytes, int64_t max_bytes, int reps) {
  nlohmann::json rows = nlohmann::json::array();
  int world = 0;
  launch(launch_options, [&](Context& ctx) {
    Table table("all-reduce (Avg, float32), " + std::to_string(ctx.world) + " ranks, comm " + ctx.comm.backend() +
                    "; GB/s = 1e9 B/s, busbw = algbw * 2(n-1)/n",
                headers());
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      std::vector<Algorithm> all = run_size(ctx, bytes / 4, reps);
      if (!ctx.is_root()) continue;
      Row row = result_row(all, bytes / 4, ctx.world);
      table.add_row(row.cells);
      rows.push_back(row.json);
    }
    if (!ctx.is_root()) return;
    world = ctx.world;
    table.print(std::cout);
    std::cout << " a/b = a's busbw / b's (> 1: a is faster); memcpy = GB/s of one rank copying S bytes while all do\n"
              << std::flush;
  });
  return {{"ranks", world}, {"results", rows}};
}

// ----------------------------------------------------------------------------
// machine and flags

std::string machine_line(const std::string& comm) {
  return dpt_bench::cpu_line() + "; comm " + comm +
         (comm == "threads" ? " (ranks are threads of one process)" : " (one process per rank)");
}

// "4K", "64M", "1G" (KiB, MiB, GiB) or plain bytes; rounded down to whole floats.
CLI::Validator byte_size() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        double value = std::strtod(v.c_str(), &end);
        std::string unit = end ? end : "";
        double scale = unit.empty() ? 1 : unit == "K" || unit == "KiB" ? 1024
                     : unit == "M" || unit == "MiB" ? 1 << 20 : unit == "G" || unit == "GiB" ? double(1 << 30) : -1;
        if (v.empty() || scale < 0 || !(value * scale >= 4))
          return "expects bytes (at least 4), e.g. 4096, 4K, 64M, got '" + v + "'";
        v = std::to_string(int64_t(value * scale) / 4 * 4);
        return "";
      },
      "BYTES");
}

int main(int argc, char** argv) {
  CLI::App app{"bench_allreduce — naive (ch03), ring (ch04) and library all-reduce side by side, and memcpy",
               "bench_allreduce"};
  int64_t min_bytes = 4 << 10, max_bytes = int64_t(256) << 20;
  int reps = 5;
  std::vector<int> ranks{2, 4};
  std::string comm = "threads", json_path;
  double timeout_s = 300;
  app.add_option("--min-bytes", min_bytes, "Smallest message (bytes, or 4K, 64M, 1G)")
      ->transform(byte_size())->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "Largest message; sizes go x4 from --min-bytes")
      ->transform(byte_size())->capture_default_str();
  app.add_option("--reps", reps, "Timing windows per method and size; the median is reported")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  auto* ranks_option = app.add_option("--ranks", ranks, "Worlds to run under --comm threads, comma-separated "
                                                        "(under mpi the world is mpirun's -np)")
                           ->delimiter(',')->capture_default_str();
  app.add_option("--comm", comm, "threads (ranks are threads of this process) | mpi (start with mpirun)")
      ->check(CLI::IsMember({"threads", "mpi"}))->capture_default_str();
  app.add_option("--comm-timeout", timeout_s, "Seconds a rank may wait on a peer (naive at 256 MiB is slow)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  app.add_option("--set", g_set, "ch04: naive, ring, pieced ring, library, memcpy; ch08: chapter 08's all-reduces "
                                 "and the library")
      ->check(CLI::IsMember({"ch04", "ch08"}))->capture_default_str();
  app.add_option("--nodes", g_nodes, "--set ch08: nodes the two-level all-reduce groups the ranks in (divides --ranks)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (min_bytes > max_bytes)
    return std::cerr << "bench_allreduce: --min-bytes " << min_bytes << " is above --max-bytes " << max_bytes << "\n", 2;
  if (max_bytes / 4 > INT32_MAX)
    return std::cerr << "bench_allreduce: --max-bytes: at most 8 GiB (MPI counts are int)\n", 2;
  for (int n : ranks)
    if (n < 1 || n > 64) return std::cerr << "bench_allreduce: --ranks: expects 1..64 ranks, got " << n << "\n", 2;

  LaunchOptions launch_options;
  launch_options.comm = comm;
  launch_options.timeout_s = timeout_s;
  if (comm == "mpi") {
    // One world, the processes mpirun started; a --ranks given must name it.
    if (ranks_option->count() > 0 && ranks.size() != 1)
      return std::cerr << "bench_allreduce: --comm mpi runs one world (mpirun -np N): give one --ranks, or none\n", 2;
    launch_options.ranks_given = ranks_option->count() > 0;
    ranks = {launch_options.ranks_given ? ranks[0] : 1};
  }

  return run_guarded("bench_allreduce", [&] {
    const bool root = comm == "threads" || detect_process_environment().rank == 0;
    std::string machine = machine_line(comm);
    if (root) std::cout << "machine: " << machine << "\n" << std::flush;
    nlohmann::json worlds = nlohmann::json::array();
    for (int n : ranks) {
      launch_options.ranks = n;
      worlds.push_back(run_world(launch_options, min_bytes, max_bytes, reps));
    }
    if (root && !json_path.empty()) {
      nlohmann::json doc = {{"bench", "allreduce"}, {"machine", machine}, {"comm", comm}, {"reps", reps},
                            {"min_bytes", min_bytes}, {"max_bytes", max_bytes}, {"worlds", worlds}};
      std::ofstream(json_path) << doc.dump(2) << "\n";
      std::cout << "wrote " << json_path << "\n";
    }
  });
}
