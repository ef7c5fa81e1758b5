// zero_setup.cpp — chapter 07's flags, plan, master copy and --compare-stages.
#include "zero_setup.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/output_file.h"
#include "dpt/report.h"
#include "dpt/timing.h"
#include "zero_fault.h"
#include "zero_report.h"

namespace dpt::ch07 {

namespace {
// A finite number in [low, high] ("nan" and "inf" are refused: --weight-decay
// nan once became a silent 0).
CLI::Validator finite_in(double low, double high) {
  return CLI::Validator(
      [low, high](std::string& text) {
        char* end = nullptr;
        double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
        if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(value) && value >= low && value <= high)
          return std::string();
        return "expects a finite number from " + fmt(low) + " to " + fmt(high) + ", got '" + text + "'";
      },
      "NUMBER");
}
}  // namespace

void add_ch07_flags(CLI::App& app, Ch07Flags& flags, const Options& options) {
  limit_optimizers(app, {"adam", "adamw"}, "ZeRO shards Adam's m and v");
  app.add_option("--stage", flags.stage, "ZeRO stage: 0 plain DP, 1 +optimizer state, 2 +gradients, 3 +parameters")
      ->check(integer_in(0, 3))->capture_default_str();
  app.add_flag("--prefetch", flags.prefetch, "Stage 3: gather the next layer while this one computes");
  app.add_option("--bucket-mb", flags.bucket_mb, "Gradient bucket cap in MiB (whole layers, last first)")
      ->check(finite_in(0.0, 1e6))->capture_default_str();
  app.add_option("--weight-decay", flags.weight_decay, "Adam: L2 penalty; AdamW: decoupled decay (default 0 / 0.01)")
      ->check(finite_in(0.0, 1.0));
  app.add_option("--device-memory", flags.device_memory, "Cap each rank's device, e.g. 2MiB (default: no cap)")
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              parse_size(text);
              return std::string();
            } catch (const Error& e) {
              return std::string(e.what());
            }
          },
          "SIZE"));
  add_output(app, "--report-json", flags.report_json,
             "Write memory by category and bytes per rank as JSON");
  app.add_option("--save-checkpoint", flags.save_checkpoint, "Save a sharded checkpoint into DIR (after the last step)");
  app.add_option("--checkpoint-every", flags.checkpoint_every, "With --save-checkpoint: also every K steps")
      ->check(positive_integer());
  app.add_option("--resume", flags.resume, "Continue the run saved in DIR (any number of ranks, same global batch)");
  app.add_option("--consolidate", flags.consolidate, "Write the checkpoint in DIR to --save-weights FILE, then stop");
  app.add_flag("--compare-stages", flags.compare, "Run stages 0-3 and print time, bytes and peak memory side by side");
  add_fault_flags(app, flags.faults);  // under mpirun: a rank's process killed at a step (zero_fault.h)
  app.add_option("--max-loss", flags.max_loss,
                 "Stop at the first step whose loss is above X or not finite, exit 5 (for scripts/dptrun)")
      ->check(number_in(0.0, 1e30));
  app.add_option("--skip-batch", flags.skip_batches,
                 "Never draw batch K of the global order: later steps draw the next ones (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(non_negative_integer());
  app.final_callback([&app, &flags, &options] {  // once --comm and --steps are known: exit 2 with a sentence
    if (flags.faults.fail.empty() && flags.faults.join.empty()) return;
    const std::string comm = app.get_option("--comm")->as<std::string>();
    const int world = comm == "threads" ? 1 : detect_process_environment().world;
    const std::string problem = zero_fault_problem(flags.faults, comm, world, options.steps);
    if (!problem.empty()) throw CLI::ValidationError(problem);
  });
}

ZeroPlan plan_of(const Options& o, const Ch07Flags& f) {
  DPT_CHECK(o.optimizer == "adam" || o.optimizer == "adamw",
            "ch07 shards Adam's state: --optimizer must be adam or adamw, got '" << o.optimizer << "'");
  ZeroPlan plan;
  plan.stage = f.stage;
  plan.prefetch = f.prefetch;
  plan.bucket_bytes = int64_t(std::llround(f.bucket_mb * 1024 * 1024));
  plan.adam.lr = o.lr;
  plan.adam.decoupled = o.optimizer == "adamw";
  plan.adam.weight_decay = float(f.weight_decay >= 0 ? f.weight_decay : (plan.adam.decoupled ? 0.01 : 0.0));
  return plan;
}

int64_t parse_size(const std::string& text) {
  if (text.empty()) return 0;
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  const std::pair<const char*, double> units[] = {{"", 1}, {"B", 1}, {"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
                                                  {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}};
  for (auto [name, scale] : units)
    if (used > 0 && unit == name && std::isfinite(value) && value > 0 && value * scale < 9e18)
      return int64_t(value * scale);
  DPT_FAIL("--device-memory expects a size such as 2MiB, 512KiB or 3000000, got '" << text << "'");
}

std::vector<float> initial_parameters(Context& ctx, const Options& o) {
  std::vector<float> flat;
  if (ctx.is_root()) flat = flatten(build_model(o, Device::host()).parameters());
  int64_t psi = 0;
  std::vector<int64_t> widths = o.widths();
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) psi += widths[l] * widths[l + 1] + widths[l + 1];
  flat.resize(std::size_t(psi));
  ctx.comm.broadcast(flat.data(), psi, 0);
  return flat;
}

void compare_stages(Context& ctx, const Options& o, const Dataset& data, const Ch07Flags& f, Verdicts& verdicts) {
  Options quiet = o;
  quiet.quiet = true, quiet.metrics.clear();
  std::vector<float> initial = initial_parameters(ctx, o);
  Partition part = partition_parameters(int64_t(initial.size()), ctx.world);
  Table table("stages side by side (" + std::to_string(ctx.world) + " ranks, " + std::to_string(o.steps) + " steps)",
              {"stage", "step time / stage 0", "sent per rank per step", "theory", "peak per rank (worst)",
               "formula"});
  double base = 0;
  std::vector<float> stage0;
  nlohmann::json report = {{"world", ctx.world}, {"psi", part.psi}, {"stages", nlohmann::json::array()}};
  for (int stage = 0; stage <= 3; ++stage) {
    Ch07Flags g = f;
    g.stage = stage;
    ZeroPlan plan = plan_of(o, g);
    ZeroRun run = train_zero(ctx, quiet, data, initial, plan, "stage " + std::to_string(stage));
    double t = max_over_ranks(ctx.comm, median(run.step_seconds));
    double peak = max_over_ranks(ctx.comm, run.memory.peak_total);
    if (stage == 0) base = t;
    double sent = 0, worst = 0, steps = double(std::max<std::size_t>(1, run.losses.size()));
    const double theory = theory_bytes_per_step(stage, double(part.psi), ctx.world);
    for (int r = 0; r < ctx.world; ++r) {
      sent = std::max(sent, double(run.traffic.bytes_sent(r)) / steps);
      worst = std::max(worst, std::fabs(double(run.traffic.bytes_sent(r)) / steps - theory));
    }
    if (stage == 0) stage0 = run.weights;
    const std::string name = "stage " + std::to_string(stage) + ": ";
    if (ctx.is_root() && ctx.world == 1) {  // nothing is sharded, nothing sent: no stage can differ
      verdicts.cannot_fail(name + "bytes sent per rank per step, weights vs stage 0", on_one_rank(4));
    } else if (ctx.is_root()) {  // the same checks as a run at that --stage (zero_report.cpp, main.cpp)
      verdicts.at_most(name + "bytes sent per rank per step: max |measured - theory| (bytes)", worst,
                       12.0 * double(part.padded - part.psi), "at most 3 collectives × 4 bytes × the padding");
      if (stage > 0)
        verdicts.at_most(name + "max |w_stage - w_stage0|", max_abs_difference(run.weights, stage0), 0,
                         "every stage sums each gradient in the same ring order and runs the same Adam");
    }
    table.add_row({std::to_string(stage), fixed(t / base, 2), format_bytes(sent),
                   format_bytes(theory), format_bytes(peak),
                   formula_text(stage) + " = " + format_bytes(formula_bytes(stage, double(part.psi), ctx.world))});
    report["stages"].push_back(run_json(ctx, run, part, stage, plan.prefetch));
  }
  if (!ctx.is_root()) return;
  table.print(std::cout);
  if (!f.report_json.empty()) write_output_file(f.report_json, report.dump(1) + "\n");
}

}  // namespace dpt::ch07
