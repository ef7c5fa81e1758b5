// bench_allreduce — the chapters' all-reduces against the library's, and
// against memcpy, nccl-tests style.
//
// For each message size S (4 KiB … 256 MiB, ×4) and each world of n ranks it
// prints, side by side in one run:
//   naive    chapter 03's host_average_gradients on one flat tensor (gather
//            to rank 0, average, send back);
//   ring     chapter 04's ring_all_reduce (Avg);
//   library  comm.all_reduce (Avg): the threads backend's own collective, or
//            under --comm mpi the MPI backend's (MPI_Iallreduce behind a small
//            argument-checking all-reduce, then ÷n);
//   MPI_Allreduce (--comm mpi only) Open MPI's blocking MPI_Allreduce called
//            directly on MPI_COMM_WORLD, then ÷n: what "Open MPI's own
//            all-reduce" means to an MPI user;
// each as time, algbw = S / t and busbw = algbw · 2(n−1)/n (the bytes each
// rank must send per second; nccl-tests' doc/PERFORMANCE.md), then the ratios
// ring / library (and ring / MPI_Allreduce) of their bandwidths: above 1 the
// ring is faster. Under threads, the memcpy ceiling too: every rank thread
// copying S bytes between two buffers of its own, all at once, and ring busbw
// / that bandwidth. Why that is the ceiling: bench/README.md.
//
// Timing: per size, every method runs twice to warm up (and is checked: every
// rank starts with rank+1 everywhere, so every element must end as (n+1)/2).
// Then `--reps` rounds; a round times one window of each method in turn
// (interleaved, so a noisy neighbour slows all alike). A window is a barrier,
// the method run enough times to last ~20 ms, and a barrier; it lasts as long
// as its slowest rank took. The median window is reported.
//
// Run it:
//     build/reference/bin/bench_allreduce                          # threads, 2 and 4 ranks
//     build/reference/bin/bench_allreduce --ranks 4 --max-bytes 64M --json ar.json
//     mpirun -np 2 build/reference/bin/bench_allreduce --comm mpi
//     mpirun -np 4 --oversubscribe build/reference/bin/bench_allreduce --comm mpi
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ch03_holes.h"
#include "ch04_holes.h"
#include "machine.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "dpt/report.h"

using namespace dpt;
using Clock = std::chrono::steady_clock;

constexpr double kWindowSeconds = 0.02;  // target length of one timing window
constexpr int64_t kMaxCallsPerWindow = 10000;

// ----------------------------------------------------------------------------
// Open MPI called directly (the one place this bench depends on how dpt was
// built: DPT_HAVE_MPI comes with libdpt when CMake found MPI)

#if DPT_HAVE_MPI
#include <mpi.h>
// data (count,) becomes the mean over the processes: MPI_Allreduce(SUM), ÷n.
void mpi_allreduce_avg(float* data, int64_t count, int world) {
  DPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  const float inverse = 1.0f / float(world);
  for (int64_t i = 0; i < count; ++i) data[i] *= inverse;
}
std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);  // allowed before MPI_Init
  std::string text(version, std::size_t(length));
  return text.substr(0, text.find_first_of(",\n"));
}
#else
void mpi_allreduce_avg(float*, int64_t, int) { DPT_FAIL("this dpt was built without MPI"); }
std::string mpi_library_version() { return "no MPI"; }
#endif

// ----------------------------------------------------------------------------
// timing, on every rank in step

// One thing to time on this rank: call() does one all-reduce (or one memcpy).
struct Method {
  Method(std::string method_name, std::function<void()> fn)
      : name(std::move(method_name)), call(std::move(fn)) {}
  std::string name;              // "naive", "ring", "library", "MPI_Allreduce", "memcpy"
  std::function<void()> call;    // runs on every rank at once
  bool available = true;         // false: not in this backend, or a hole that throws NotImplemented
  int64_t calls = 1;             // per window, the same on every rank
  std::vector<double> per_call;  // seconds per call, one entry per window
  double median() {
    std::nth_element(per_call.begin(), per_call.begin() + per_call.size() / 2, per_call.end());
    return per_call[per_call.size() / 2];
  }
};

// The largest of every rank's `seconds`: a collective is done when its slowest
// rank is. Every rank gets the same value, so decisions made from it agree.
double slowest(Context& ctx, double seconds) {
  std::vector<float> all(std::size_t(ctx.world));
  float mine = float(seconds);
  ctx.comm.all_gather(&mine, all.data(), 1);
  return double(*std::max_element(all.begin(), all.end()));
}

// Seconds per call of one window of `calls` calls: from the first rank's
// start to the last rank's end. Each rank times from its own exit of the first
// barrier to its exit of the second (which waits for the last rank), and the
// longest of those counts. (Without the second barrier a rank that is not
// scheduled for a while — 4 ranks on 2 cores — would start its clock late and
// time only its own share: memcpy, which waits for nobody, would look faster.)
double time_window(Context& ctx, Method& m, int64_t calls) {
  ctx.comm.barrier();
  auto start = Clock::now();
  for (int64_t i = 0; i < calls; ++i) m.call();
  ctx.comm.barrier();
  return slowest(ctx, seconds_since(start)) / double(calls);
}

// One more warm-up call (the check was the first), which also sets how many
// calls make a ~20 ms window; then `reps` interleaved rounds of one window per
// method.
void measure(Context& ctx, const std::vector<Method*>& methods, int reps) {
  for (Method* m : methods) {
    if (!m->available) continue;
    double t = time_window(ctx, *m, 1);
    m->calls = std::clamp<int64_t>(int64_t(kWindowSeconds / std::max(t, 1e-9)), 1, kMaxCallsPerWindow);
  }
  for (int r = 0; r < reps; ++r)
    for (Method* m : methods)
      if (m->available) m->per_call.push_back(time_window(ctx, *m, m->calls));
}

// ----------------------------------------------------------------------------
// one message size, on every rank

// The methods on `count` floats. ring, library and MPI_Allreduce reduce `data`
// in place; naive reduces `grad`, a tensor on the rank's device (as chapter 03
// averages gradients); memcpy copies copy_from to copy_to.
struct SizeBench {
  int64_t count;
  std::vector<float> data, copy_from, copy_to;
  Tensor grad;
  std::vector<Tensor> grads;  // {grad}: the same storage
  Method naive, ring, library, mpi, copy;

  SizeBench(Context& ctx, int64_t n_floats)
      : count(n_floats),
        data(std::size_t(count)),
        copy_from(ctx.comm.backend() == "threads" ? std::size_t(count) : 0, 1.0f),
        copy_to(copy_from.size()),
        grad(Tensor::empty({count}, ctx.device)),
        grads{grad},
        naive("naive", [&ctx, this] { ch03::host_average_gradients(ctx.comm, grads); }),
        ring("ring", [&ctx, this] { ch04::ring_all_reduce(ctx.comm, data.data(), count, ReduceOp::Avg); }),
        library("library", [&ctx, this] { ctx.comm.all_reduce(data.data(), count, ReduceOp::Avg); }),
        mpi("MPI_Allreduce", [&ctx, this] { mpi_allreduce_avg(data.data(), count, ctx.world); }),
        copy("memcpy", [this] { std::memcpy(copy_to.data(), copy_from.data(), 4 * std::size_t(count)); }) {
    mpi.available = ctx.comm.backend() == "mpi";
    copy.available = ctx.comm.backend() == "threads";
  }

  // Every rank starts with rank+1 everywhere, so every element must end as
  // the mean (n+1)/2: the sum of small integers is exact in any order, and Avg
  // then multiplies (or divides) by a rounded 1/n, hence the few-ulp
  // tolerance. A hole that throws NotImplemented (student build) throws on
  // every rank at entry, before any message: the method is skipped, not the bench.
  void check(Context& ctx, Method& m, const float* result) {
    if (!m.available) return;
    const float start = float(ctx.rank + 1), mean = float(ctx.world + 1) / 2;
    std::fill(data.begin(), data.end(), start);
    std::fill(grad.data(), grad.data() + count, start);
    try {
      m.call();
    } catch (const NotImplemented&) {
      m.available = false;
      return;
    }
    for (int64_t i = 0; i < count; ++i)
      DPT_CHECK(std::abs(result[i] - mean) <= 4e-7f * mean,
                m.name << " all-reduce of " << count << " floats on " << ctx.world << " ranks: element " << i
                       << " is " << result[i] << ", expected the mean " << mean);
  }

  // Timed runs then reduce equal values ((n+1)/2 everywhere): they stay put.
  void run(Context& ctx, int reps) {
    check(ctx, naive, grad.data());
    for (Method* m : {&ring, &library, &mpi}) check(ctx, *m, data.data());
    if (copy.available) copy.call();  // its first touch, as the others' check
    measure(ctx, {&naive, &ring, &library, &mpi, &copy}, reps);
  }
};

// ----------------------------------------------------------------------------
// results

struct Row {
  nlohmann::json json;
  std::vector<std::string> cells;
};

// time / algbw / busbw of one method (three cells, "-" when not measured);
// returns its busbw (0 when not measured).
double add_method(Row& row, Method& m, int64_t bytes, int world) {
  if (!m.available || m.per_call.empty()) {
    row.cells.insert(row.cells.end(), {"-", "-", "-"});
    row.json[m.name] = nullptr;
    return 0;
  }
  double t = m.median();
  double algbw = double(bytes) / t / 1e9, busbw = algbw * 2.0 * (world - 1) / world;
  row.cells.insert(row.cells.end(), {fixed(t * 1e6, 1), fixed(algbw, 2), fixed(busbw, 2)});
  row.json[m.name] = {{"time_us", t * 1e6}, {"algbw_gbps", algbw}, {"busbw_gbps", busbw}, {"calls_per_window", m.calls}};
  return busbw;
}

// a / b as a cell and a JSON value ("-" and null when either is missing).
void add_ratio(Row& row, const std::string& key, double a, double b) {
  bool both = a > 0 && b > 0;
  row.cells.push_back(both ? fixed(a / b, 2) : "-");
  row.json[key] = both ? nlohmann::json(a / b) : nlohmann::json();
}

std::vector<std::string> headers(bool threads) {
  std::vector<std::string> h = {"size", "count", "naive us", "algbw", "busbw", "ring us", "algbw", "busbw",
                                "library us", "algbw", "busbw"};
  if (threads) h.insert(h.end(), {"ring/library", "memcpy GB/s", "ring/memcpy"});
  else h.insert(h.end(), {"MPI_Allreduce us", "algbw", "busbw", "ring/library", "ring/MPI_Allreduce"});
  return h;
}

Row result_row(SizeBench& b, int world) {
  Row row;
  int64_t bytes = 4 * b.count;
  row.json = {{"bytes", bytes}, {"count", b.count}};
  row.cells = {format_bytes(double(bytes)), std::to_string(b.count)};
  add_method(row, b.naive, bytes, world);
  double ring = add_method(row, b.ring, bytes, world);
  double library = add_method(row, b.library, bytes, world);
  if (b.copy.available) {
    add_ratio(row, "ring_over_library", ring, library);
    double copy = double(bytes) / b.copy.median() / 1e9;  // per rank, all ranks copying at once
    row.cells.push_back(fixed(copy, 2));
    row.json["memcpy_gbps"] = copy;
    add_ratio(row, "ring_busbw_over_memcpy", ring, copy);
  } else {
    double mpi = add_method(row, b.mpi, bytes, world);
    add_ratio(row, "ring_over_library", ring, library);
    add_ratio(row, "ring_over_mpi_allreduce", ring, mpi);
  }
  return row;
}

// Runs every size on one world (all ranks); rank 0 prints the table. Returns
// {"ranks": n, "results": [a row per size]} (rows only on rank 0).
nlohmann::json run_world(const LaunchOptions& launch_options, int64_t min_bytes, int64_t max_bytes, int reps) {
  nlohmann::json rows = nlohmann::json::array();
  int world = 0;
  launch(launch_options, [&](Context& ctx) {
    const bool threads = ctx.comm.backend() == "threads";
    Table table("all-reduce (Avg, float32), " + std::to_string(ctx.world) + " ranks, comm " + ctx.comm.backend() +
                    "; GB/s = 1e9 B/s, busbw = algbw * 2(n-1)/n",
                headers(threads));
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      SizeBench bench(ctx, bytes / 4);
      bench.run(ctx, reps);
      if (!ctx.is_root()) continue;
      Row row = result_row(bench, ctx.world);
      table.add_row(row.cells);
      rows.push_back(row.json);
    }
    if (!ctx.is_root()) return;
    world = ctx.world;
    table.print(std::cout);
    std::cout << " ring/X = ring busbw / X's busbw (> 1: the ring is faster)";
    if (threads) std::cout << "; memcpy = GB/s of one rank thread copying S bytes while all ranks do";
    std::cout << "\n" << std::flush;
  });
  return {{"ranks", world}, {"results", rows}};
}

// ----------------------------------------------------------------------------
// machine and flags

std::string machine_line(const std::string& comm) {
  std::string line = dpt_bench::cpu_line() + "; comm " + comm;
  if (comm == "threads") return line + " (ranks are threads of one process)";
  return line + " (one process per rank, " + mpi_library_version() + ")";
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
