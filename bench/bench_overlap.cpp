// bench_overlap — how much of the all-reduce does chapter 05 hide behind backward?
//
// Trains the same model twice with chapter 05's loop (bucketed_training.h):
// with overlap (each bucket's ring all-reduce launched from the grad-ready
// hooks, while backward runs) and without (every bucket after backward).
// Prints, from the loop's own record on rank 0 and the median over steps:
//   step time with overlap ÷ without (< 1: overlap pays),
//   share of communication hidden = Σ comm time inside backward ÷ Σ comm time,
//   backward time ÷ comm time (overlap can hide at most min(1, this)).
// The default is a model where backward takes at least as long as the
// all-reduce over a simulated 10 Gbit/s link (--link ethernet), with a small
// first layer: its bucket is the last one ready and can never hide. Goal: ≥ 70 %
// hidden. The timings are this machine's; the ratios are what to compare.
//
// Run it:
//     build/reference/bin/bench_overlap
//     build/reference/bin/bench_overlap --ranks 4 --link infiniband --json overlap.json
//
// Left out: GPUs (the simulated devices are CPU threads), more than one
// progress thread per rank, repeated runs.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bucketed_training.h"
#include "dpt/data_parallel.h"
#include "dpt/report.h"
#include "dpt/timing.h"

using namespace dpt;

namespace {
struct Measured {
  double step_s = 0, backward_s = 0, comm_s = 0, hidden_share = 0;
};

// Medians over steps after `warmup`, rank 0's record; hidden share over all of them.
Measured measure(Context& ctx, const Options& o, const Dataset& data, ch05::BucketPlan plan, int64_t warmup) {
  MLP replica = make_replica(ctx, o);
  ch05::BucketedRun run = ch05::train_bucketed(ctx, o, data, replica, plan, "bench");
  std::vector<double> step, backward, comm;
  double hidden = 0, total = 0;
  for (std::size_t i = std::size_t(warmup); i < run.steps.size(); ++i) {
    const ch05::BucketStep& s = run.steps[i];
    step.push_back(s.step_s), backward.push_back(s.backward_s), comm.push_back(s.comm_s);
    hidden += s.hidden_s, total += s.comm_s;
  }
  return {median(step), median(backward), median(comm), total > 0 ? hidden / total : 0};
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_overlap — step time and hidden communication, chapter 05 with and without overlap",
               "bench_overlap"};
  Options o;
  o.model = "64-1024-1024-1024-10";  // 8.4 MiB of gradients, the first layer 256 KiB
  o.batch = 256;
  o.steps = 12;
  o.quiet = true;
  LaunchOptions launch_options;
  launch_options.ranks = 2;
  launch_options.link_preset = "ethernet";
  double bucket_mb = 1;
  int64_t warmup = 2;
  std::string json_path;
  add_common_flags(app, o);
  add_launch_flags(app, launch_options);
  app.add_option("--bucket-mb", bucket_mb, "Bucket cap in MiB")->check(CLI::Range(0.0, 1e6))->capture_default_str();
  app.add_option("--warmup", warmup, "Steps left out of the medians")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON here");
  parse_flags(app, argc, argv);
  return run_guarded("bench_overlap", [&] {
    DPT_CHECK(o.steps > warmup, "--steps (" << o.steps << ") must exceed --warmup (" << warmup << ")");
    launch(launch_options, [&](Context& ctx) {
      Dataset data = load_dataset(o);
      int64_t cap = int64_t(bucket_mb * 1024 * 1024);
      Measured on = measure(ctx, o, data, {cap, cap, true, 1}, warmup);
      Measured off = measure(ctx, o, data, {cap, cap, false, 1}, warmup);
      if (!ctx.is_root()) return;
      Table table("bench_overlap: " + std::to_string(ctx.world) + " ranks, model " + o.model + ", batch " +
                      std::to_string(o.batch) + " per rank, link " + effective_link(ctx.options).describe(),
                  {"", "step (ms)", "backward (ms)", "comm (ms)", "comm hidden"});
      for (auto [name, m] : {std::pair<const char*, Measured>{"overlap", on}, {"no overlap", off}})
        table.add_row({name, fixed(m.step_s * 1e3, 2), fixed(m.backward_s * 1e3, 2), fixed(m.comm_s * 1e3, 2),
                       fixed(100 * m.hidden_share, 0) + " %"});
      table.print(std::cout);
      double ratio = on.step_s / off.step_s;
      std::cout << "step time with overlap / without: " << fixed(ratio, 2) << "\n"
                << "share of communication hidden behind backward: " << fixed(100 * on.hidden_share, 0)
                << " % (goal >= 70 %)\n"
                << "backward / communication (no overlap): " << fixed(off.backward_s / off.comm_s, 2)
                << " (overlap can hide at most min(1, this), less the first layer's bucket)\n";
      if (json_path.empty()) return;
      auto as_json = [](const Measured& m) {
        return nlohmann::json{{"step_s", m.step_s}, {"backward_s", m.backward_s}, {"comm_s", m.comm_s},
                              {"hidden_share", m.hidden_share}};
      };
      std::ofstream(json_path) << nlohmann::json{{"ranks", ctx.world}, {"model", o.model}, {"batch", o.batch},
                                                 {"link", effective_link(ctx.options).describe()},
                                                 {"overlap", as_json(on)}, {"no_overlap", as_json(off)},
                                                 {"step_ratio", ratio}}.dump(2)
                               << "\n";
    });
  });
}
