// bench_gpu_ring — chapter 04's ring all-reduce on GPU buffers, against the
// communicator's own all-reduce on the same buffers and against the GPU's
// device-to-device copy bandwidth.
//
// For each world of n ranks (threads sharing the machine's GPUs, or one
// process per GPU under mpirun with --nccl) and each message size S, every
// rank holds S bytes on its GPU (ctx.device under --device cuda) and it times:
//   ring     chapter 04's ring_all_reduce (Avg): n−1 scatter-reduce steps of
//            sendrecv + an add kernel, n−1 all-gather steps;
//   library  comm.all_reduce (Avg) on the same buffer: under --nccl,
//            NCCL's all-reduce; under threads, the threads backend's
//            reduction on the GPU;
//   copy     one device-to-device copy of S bytes on cuda:0 (gpu::copy), the
//            ceiling: no all-reduce moves its bytes faster than a copy does.
// Each as time, algbw = S / t and busbw = algbw · 2(n−1)/n (theory in
// bench/README.md), then ring / copy and library / copy (busbw over copy
// bandwidth: the share of the copy rate each reaches) and ring / library.
//
// Checking: before timing, each size runs the ring and the library once on
// inputs rank + 1 and both must give (n+1)/2 everywhere (exact: the sum is an
// integer and n is 2 or 4). Timing: a warm-up call, then `--repeats` windows
// of `calls` calls each, timed by dpt::time_window (first rank's start to the
// last rank's end); both calls complete on the GPU before they return (every
// sendrecv waits for its stream), so a host clock measures them. The median
// window is reported. Under threads all ranks share one GPU's memory
// bandwidth: read the busbw as the GPU's, not a link's.
//
// Without a usable GPU it prints why and exits 0, writing {"skipped": reason}
// (as bench_gpu_step does).
//
//     build/gpu/bin/bench_gpu_ring                                  # threads, 2 and 4 ranks on cuda:0
//     build/gpu/bin/bench_gpu_ring --ranks 2 --max-mib 64 --json ring.json
//     mpirun -np 2 build/gpu/bin/bench_gpu_ring --nccl               # one GPU per rank: NCCL's all-reduce
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ch04.h"
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
#include "dpt/launch.h"
#include "dpt/report.h"
#include "dpt/timing.h"
#include "dpt/verdict.h"

using namespace dpt;
using json = nlohmann::json;

constexpr double kWindowSeconds = 0.02;  // target length of one timing window

// ----------------------------------------------------------------------------
// the references: a device copy, and the check of one call's result

// Seconds per device-to-device copy of `bytes` on GPU `gpu` (median window).
// The window's copies are replayed from one CUDA graph: enqueued one by one,
// a copy of a few MiB ends before the host has queued the next (≈ 3 µs of
// host work per gpu::copy), and the idle GPU between them would be timed as
// copy time, understating the bandwidth the ring is compared against.
double copy_seconds(int64_t bytes, int repeats, int gpu) {
  gpu::set_current_device(gpu);
  Tensor src = Tensor::full({bytes / 4}, 1.0f, Device::cuda(gpu)), dst = Tensor::empty({bytes / 4}, Device::cuda(gpu));
  gpu::Stream& stream = gpu::current_stream(gpu);
  auto captured = [&](int calls) {
    auto copies = std::make_unique<gpu::Graph>();
    copies->capture(stream, [&] {
      for (int i = 0; i < calls; ++i) gpu::copy(dst.data(), src.data(), std::size_t(bytes), gpu);
    });
    copies->replay(stream);  // warm-up: the first launch uploads the graph
    return copies;
  };
  auto window = [&](const gpu::Graph& copies, int calls) {
    gpu::Event start, stop;
    start.record(stream);
    copies.replay(stream);
    stop.record(stream);
    stop.synchronize();
    return 1e-3 * double(stop.elapsed_ms_since(start)) / calls;
  };
  double once = window(*captured(3), 3);
  int calls = int(std::clamp(kWindowSeconds / std::max(once, 1e-7), 3.0, 10000.0));
  auto copies = captured(calls);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) times.push_back(window(*copies, calls));
  return median(times);
}

using AllReduce = std::function<void(Context&, Tensor&)>;  // data (S/4,) on ctx.device becomes the mean

// Runs `call` once on inputs rank + 1; "" when every element is (n+1)/2.
std::string check_mean(Context& ctx, Tensor& data, const AllReduce& call) {
  kernels_for(data.device()).fill(data.data(), float(ctx.rank + 1), data.numel());
  call(ctx, data);
  std::vector<float> got = data.to_vector();
  const float want = float(ctx.world + 1) / 2.0f;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want)
      return "element " + std::to_string(i) + " is " + fmt(got[i], 7) + ", expected " + fmt(want, 7);
  return "";
}

// Median seconds of `repeats` windows of `call`, slowest rank (the same on every rank).
double time_call(Context& ctx, Tensor& data, const AllReduce& call, int repeats) {
  call(ctx, data);  // warm-up
  double once = time_window(ctx.comm, [&] { call(ctx, data); }, 1);
  int calls = int(std::clamp(kWindowSeconds / std::max(once, 1e-7), 1.0, 1000.0));
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) times.push_back(time_window(ctx.comm, [&] { call(ctx, data); }, calls));
  return median(times);
}

// ----------------------------------------------------------------------------
// one world: every size, ring and library

json run_world(const LaunchOptions& launch_options, const std::vector<int64_t>& sizes, int repeats,
               const std::vector<double>& copy_s) {
  const AllReduce ring = [](Context& c, Tensor& d) { ch04::ring_all_reduce(c.comm, d.data(), d.numel(), ReduceOp::Avg); };
  const AllReduce library = [](Context& c, Tensor& d) { c.comm.all_reduce(d.data(), d.numel(), ReduceOp::Avg); };
  json rows = json::array();
  launch(launch_options, [&](Context& ctx) {
    DPT_CHECK(!ctx.device.is_host_memory(), "bench_gpu_ring: rank " << ctx.rank << " got " << ctx.device.name()
                                                                    << ", not a GPU");
    const int n = ctx.world;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      Tensor data = Tensor::empty({sizes[k] / 4}, ctx.device);
      std::string ring_wrong = check_mean(ctx, data, ring), library_wrong = check_mean(ctx, data, library);
      DPT_CHECK(ring_wrong.empty() && library_wrong.empty(),
                "bench_gpu_ring: rank " << ctx.rank << ", " << format_bytes(double(sizes[k]))
                                        << ": wrong mean: ring " << (ring_wrong.empty() ? "ok" : ring_wrong)
                                        << ", library " << (library_wrong.empty() ? "ok" : library_wrong));
      double ring_s = time_call(ctx, data, ring, repeats), library_s = time_call(ctx, data, library, repeats);
      if (!ctx.is_root()) continue;
      const double s = double(sizes[k]), bus = 2.0 * (n - 1) / n, copy_gbs = s / copy_s[k] / 1e9;
      const double ring_busbw = s / ring_s / 1e9 * bus, library_busbw = s / library_s / 1e9 * bus;
      rows.push_back({{"ranks", n}, {"bytes", sizes[k]}, {"ring_s", ring_s}, {"library_s", library_s},
                      {"copy_s", copy_s[k]}, {"ring_busbw_gb_per_s", ring_busbw},
                      {"library_busbw_gb_per_s", library_busbw}, {"copy_gb_per_s", copy_gbs},
                      {"ring_over_copy", ring_busbw / copy_gbs}, {"library_over_copy", library_busbw / copy_gbs},
                      {"ring_over_library", library_s / ring_s}});
    }
  });
  return rows;
}

void print_table(const json& rows, const std::string& comm) {
  Table table("ring all-reduce (Avg) on GPU buffers vs " + comm + "'s all_reduce vs a device copy",
              {"ranks", "size", "ring us", "ring busbw", "library us", "library busbw", "copy GB/s", "ring/copy",
               "library/copy", "ring/library"});
  for (const json& r : rows)
    table.add_row({std::to_string(r["ranks"].get<int>()), format_bytes(r["bytes"].get<double>()),
                   fixed(1e6 * r["ring_s"].get<double>(), 1), fixed(r["ring_busbw_gb_per_s"].get<double>(), 1),
                   fixed(1e6 * r["library_s"].get<double>(), 1), fixed(r["library_busbw_gb_per_s"].get<double>(), 1),
                   fixed(r["copy_gb_per_s"].get<double>(), 1), fixed(r["ring_over_copy"].get<double>(), 2),
                   fixed(r["library_over_copy"].get<double>(), 2), fixed(r["ring_over_library"].get<double>(), 2)});
  table.print(std::cout);
  std::cout << " busbw = S/t * 2(n-1)/n in GB/s (bench/README.md); x/copy = busbw over the device copy's S/t;\n"
               " ring/library = library time over ring time (above 1: the ring is faster).\n";
}

// ----------------------------------------------------------------------------
// flags

int main(int argc, char** argv) {
  CLI::App app{"bench_gpu_ring — chapter 04's ring on GPU buffers vs the library all-reduce vs a device copy",
               "bench_gpu_ring"};
  std::vector<int> worlds = {2, 4};
  bool nccl = false;
  int64_t min_mib = 1, max_mib = 256;
  int repeats = 5;
  double timeout_s = 120;
  std::string json_path;
  app.add_option("--ranks", worlds, "Rank counts under threads (repeatable)")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_flag("--nccl", nccl, "Under mpirun: one rank per GPU, NCCL as the communicator (default: rank threads sharing the GPUs)");
  app.add_option("--min-mib", min_mib, "Smallest message in MiB (x4 up to --max-mib)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-mib", max_mib, "Largest message in MiB")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--repeats", repeats, "Timing windows per measurement; the median is reported")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--timeout", timeout_s, "Seconds before a stuck rank is reported")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  const std::string comm = nccl ? "nccl" : "threads";

  json doc = {{"bench", "gpu_ring"}, {"comm", comm}};
  std::string reason = gpu::unavailable_reason();
  if (reason.empty() && nccl && !gpu::built_with_nccl()) reason = "this dpt was built without NCCL";
  json rows = json::array();
  try {
    if (!reason.empty()) {
      std::cout << "bench_gpu_ring: skipped: " << reason << "\n";
      doc["skipped"] = reason;
    } else {
      // The copy is timed on this process's GPU: under mpirun --nccl each
      // process has its own (cuda:0 for all would share one GPU N ways).
      const int copy_gpu = nccl ? gpu_for_rank(detect_process_environment().local_rank) : 0;
      doc["device"] = gpu::device_description(copy_gpu);
      std::cout << "device: " << doc["device"].get<std::string>() << "\n";
      std::vector<int64_t> sizes;
      std::vector<double> copy_s;
      for (int64_t mib = min_mib; mib <= max_mib; mib *= 4) {
        sizes.push_back(mib << 20);
        copy_s.push_back(copy_seconds(mib << 20, repeats, copy_gpu));
      }
      if (nccl) worlds = {0};  // one world: the mpirun process count
      for (int n : worlds) {
        LaunchOptions o;
        o.comm = comm;
        o.device = "cuda";
        o.timeout_s = timeout_s;
        if (n > 0) o.ranks = n;
        for (json& row : run_world(o, sizes, repeats, copy_s)) rows.push_back(row);
      }
      doc["results"] = rows;
      if (!rows.empty()) print_table(rows, comm);  // under mpirun only rank 0 has rows
    }
  } catch (const Error& e) {
    std::cerr << "bench_gpu_ring: " << e.what() << "\n";
    return 1;
  }
  if (!json_path.empty() && (doc.contains("skipped") || !rows.empty())) {  // rank 0 writes it
    std::ofstream(json_path) << doc.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return 0;
}
