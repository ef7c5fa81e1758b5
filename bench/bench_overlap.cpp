// bench_overlap — how much of the all-reduce does chapter 05 hide behind backward?
//
// Trains the same model twice with chapter 05's loop (bucketed_training.h):
// with overlap (each bucket's ring all-reduce launched from the grad-ready
// hooks, while backward runs) and without (every bucket after backward).
// From the loop's own record on rank 0, steps after --warmup, it prints side
// by side (medians of per-step values):
//   step time with overlap ÷ without (< 1: overlap pays);
//   hidden, three ways, strictest last:
//     (a) the record's share: Σ comm time inside backward ÷ Σ comm time, both
//         from the overlap run (comm as it ran there: stretched by waiting
//         for the other rank's backward and by sharing the CPU);
//     (b) against the unstretched comm: 1 − exposed ÷ comm without overlap,
//         exposed = comm time outside backward in the overlap run;
//     (c) step time saved ÷ comm without overlap: what overlap bought end to
//         end, net of what the all-reduces' CPU work costs backward;
//   backward ÷ comm without overlap (overlap can hide at most about this).
//
// The default configuration, and why it is a fair one (docs/ch05_bucketing.md
// has the measurements): a stack of equal layers (like a transformer's
// blocks), so backward produces gradient bytes at an even rate; a small first
// layer, whose bucket is ready last and can never hide (the last 1024-wide
// layer's is ready only just before it: 1/5 of the bytes); a 10 Gbit/s
// Ethernet link (--link ethernet), on which communication takes about half as
// long as backward on this 2-core machine; 4 MiB buckets (each layer's weight
// is one bucket).
// The link model's transfer time is a wait (the rank's progress thread
// sleeps, as a CPU waits for a NIC), but the ring's copies and additions are
// real CPU work, as are both ranks' backward: on 2 cores, 2 ranks keep 4
// threads busy, and every message wakes a sleeping thread that then waits for
// a core. --comm-rt-priority P runs each rank's progress thread under
// SCHED_RR at priority P, so it preempts backward at once, as a NIC's DMA
// engine or NCCL's high-priority stream would not wait for compute; run the
// whole bench under `chrt -r 1` with P = 2 to also keep other processes off
// the cores of a shared machine. The bench prints what it got.
//
// Run it:
//     build/reference/bin/bench_overlap
//     chrt -r 1 build/reference/bin/bench_overlap --comm-rt-priority 2 --json overlap.json   # as root
//     build/reference/bin/bench_overlap --model 64-1024-1024-1024-10 --batch 256 --bucket-mb 1   # back-loaded: ~50 %
//
// Left out: GPUs (the simulated devices are CPU threads), more than one
// progress thread per rank, repeated runs (run it 3 times).
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>

#include "bucketed_training.h"
#include "dpt/data_parallel.h"
#include "dpt/report.h"
#include "dpt/timing.h"
#include "machine.h"

using namespace dpt;

namespace {
struct Measured {
  double step_s = 0, backward_s = 0, comm_s = 0, exposed_s = 0, hidden_share = 0;
};

// Medians over steps after `warmup`, rank 0's record; the record's hidden
// share as Σ hidden ÷ Σ comm over the same steps.
Measured measure(Context& ctx, const Options& o, const Dataset& data, ch05::BucketPlan plan, int64_t warmup) {
  MLP replica = make_replica(ctx, o);
  ch05::BucketedRun run = ch05::train_bucketed(ctx, o, data, replica, plan, "bench");
  std::vector<double> step, backward, comm, exposed;
  double hidden = 0, total = 0;
  for (std::size_t i = std::size_t(warmup); i < run.steps.size(); ++i) {
    const ch05::BucketStep& s = run.steps[i];
    step.push_back(s.step_s), backward.push_back(s.backward_s), comm.push_back(s.comm_s);
    exposed.push_back(s.comm_s - s.hidden_s);
    hidden += s.hidden_s, total += s.comm_s;
  }
  return {median(step), median(backward), median(comm), median(exposed), total > 0 ? hidden / total : 0};
}

// Puts this rank's progress thread (it runs the job) under SCHED_RR at
// `priority`; returns "" or why it could not.
std::string set_progress_rt_priority(Context& ctx, int priority) {
  std::string error;
  ctx.comm.async([&] {
        sched_param param{};
        param.sched_priority = priority;
        if (int e = pthread_setschedparam(pthread_self(), SCHED_RR, &param)) error = std::strerror(e);
      })->wait();
  return error;
}

// "SCHED_RR 1" or "normal": how the calling thread is scheduled.
std::string scheduling_of_this_thread() {
  int policy = 0;
  sched_param param{};
  pthread_getschedparam(pthread_self(), &policy, &param);
  if (policy == SCHED_RR || policy == SCHED_FIFO)
    return std::string(policy == SCHED_RR ? "SCHED_RR " : "SCHED_FIFO ") + std::to_string(param.sched_priority);
  return "normal";
}

// CPU seconds this process has used (every thread, user + system).
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The 1-minute load average: runnable threads of every process on the machine.
double load_average() {
  double load = -1;
  std::ifstream("/proc/loadavg") >> load;
  return load;
}

nlohmann::json as_json(const Measured& m) {
  return {{"step_s", m.step_s}, {"backward_s", m.backward_s}, {"comm_s", m.comm_s}, {"exposed_s", m.exposed_s},
          {"hidden_share", m.hidden_share}};
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_overlap — step time and hidden communication, chapter 05 with and without overlap",
               "bench_overlap"};
  Options o;
  o.model = "64-1024-1024-1024-1024-1024-1024-10";  // 20.3 MiB of gradients, 5 equal 4 MiB layers
  o.batch = 256;
  o.steps = 12;
  o.quiet = true;
  LaunchOptions launch_options;
  launch_options.ranks = 2;
  launch_options.link_preset = "ethernet";
  double bucket_mb = 4;
  int64_t warmup = 2;
  int comm_rt_priority = 0;
  std::string json_path;
  add_common_flags(app, o);
  add_launch_flags(app, launch_options);
  app.add_option("--bucket-mb", bucket_mb, "Bucket cap in MiB")->check(CLI::Range(0.0, 1e6))->capture_default_str();
  app.add_option("--warmup", warmup, "Steps left out of the medians")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--comm-rt-priority", comm_rt_priority,
                 "Run each rank's progress thread under SCHED_RR at this priority (1-99; 0: as the rank thread; "
                 "needs root or RLIMIT_RTPRIO)")
      ->check(CLI::Range(0, 99))->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON here");
  parse_flags(app, argc, argv);
  // The simulated Ethernet link is the default for rank threads only: under
  // mpirun (--comm mpi) the real network is what is measured (scripts/bench
  // runs it so).
  if (launch_options.comm != "threads" && app.count("--link") == 0) launch_options.link_preset = "none";
  return run_guarded("bench_overlap", [&] {
    DPT_CHECK(o.steps > warmup, "--steps (" << o.steps << ") must exceed --warmup (" << warmup << ")");
    launch(launch_options, [&](Context& ctx) {
      Dataset data = load_dataset(o);
      std::string rt_error = comm_rt_priority > 0 ? set_progress_rt_priority(ctx, comm_rt_priority) : "";
      int64_t cap = int64_t(bucket_mb * 1024 * 1024);
      const double cpu_start = process_cpu_seconds(), load_start = load_average();
      const auto wall_start = std::chrono::steady_clock::now();
      Measured on = measure(ctx, o, data, {cap, cap, true, 1}, warmup);
      Measured off = measure(ctx, o, data, {cap, cap, false, 1}, warmup);
      const double cpus_used = (process_cpu_seconds() - cpu_start) /
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
      if (!ctx.is_root()) return;
      std::cout << dpt_bench::cpu_line() << "; Eigen on " << Eigen::nbThreads() << " thread(s) per rank; "
                << ctx.world << " ranks = " << ctx.world << " backward threads + " << ctx.world
                << " progress threads; rank threads " << scheduling_of_this_thread() << ", progress threads "
                << (comm_rt_priority == 0 ? "the same"
                    : rt_error.empty()    ? "SCHED_RR " + std::to_string(comm_rt_priority)
                                          : "the same (--comm-rt-priority refused: " + rt_error + ")")
                << "\nthis process used " << fixed(cpus_used, 2) << " CPUs on average; load average "
                << fixed(load_start, 1) << " -> " << fixed(load_average(), 1)
                << (load_start > double(std::thread::hardware_concurrency()) + 0.5
                        ? " (above the CPU count: other processes took CPU time too, the timings are noisy)"
                        : "")
                << "\n";
      Table table("bench_overlap: " + std::to_string(ctx.world) + " ranks, model " + o.model + ", batch " +
                      std::to_string(o.batch) + " per rank, " + fmt(bucket_mb, 3) + " MiB buckets, link " +
                      effective_link(ctx.options).describe(),
                  {"", "step (ms)", "backward (ms)", "comm (ms)", "comm outside backward (ms)"});
      for (auto [name, m] : {std::pair<const char*, Measured>{"overlap", on}, {"no overlap", off}})
        table.add_row({name, fixed(m.step_s * 1e3, 2), fixed(m.backward_s * 1e3, 2), fixed(m.comm_s * 1e3, 2),
                       fixed(m.exposed_s * 1e3, 2)});
      table.print(std::cout);
      double ratio = on.step_s / off.step_s;
      double vs_unstretched = 1 - on.exposed_s / off.comm_s, saved = (off.step_s - on.step_s) / off.comm_s;
      std::cout << "step time with overlap / without: " << fixed(ratio, 2) << "\n"
                << "communication hidden behind backward (goal >= 70 %):\n"
                << "  (a) record: comm inside backward / comm, overlap run:         " << fixed(100 * on.hidden_share, 0)
                << " %\n"
                << "  (b) 1 - comm outside backward / comm without overlap:         " << fixed(100 * vs_unstretched, 0)
                << " %\n"
                << "  (c) step time saved / comm without overlap:                   " << fixed(100 * saved, 0) << " %\n"
                << "backward / communication (no overlap): " << fixed(off.backward_s / off.comm_s, 2)
                << " (overlap can hide at most about min(1, this), less the buckets ready last)\n";
      if (json_path.empty()) return;
      std::ofstream(json_path) << nlohmann::json{{"ranks", ctx.world}, {"model", o.model}, {"batch", o.batch},
                                                 {"bucket_mb", bucket_mb}, {"comm_rt_priority", rt_error.empty() ? comm_rt_priority : 0},
                                                 {"cpus_used", cpus_used}, {"load_average", load_start},
                                                 {"link", effective_link(ctx.options).describe()},
                                                 {"overlap", as_json(on)}, {"no_overlap", as_json(off)},
                                                 {"step_ratio", ratio}, {"hidden_record", on.hidden_share},
                                                 {"hidden_vs_unstretched", vs_unstretched}, {"step_saved_share", saved}}
                                      .dump(2)
                               << "\n";
    });
  });
}
