// planner_report.cpp — --plan's flags, its table, and --run-top's
// predicted-versus-measured comparison (planner_report.h).
#include "planner_report.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>

#include "dpt/device.h"
#include "dpt/grid.h"
#include "dpt/launch.h"
#include "dpt/options.h"

void add_plan_flags(CLI::App& app, PlanFlags& f) {
  app.add_flag("--plan", f.plan, "Print every layout of the ranks that divides the model, predicted memory and step, "
                                 "best first; train nothing");
  app.add_option("--memory-mib", f.memory_mib, "--plan: each rank's memory budget in MiB (0: none)")
      ->check(dpt::number_from(0, 1e9));
  app.add_option("--nodes", f.nodes, "--plan: nodes the ranks are grouped in, node-major "
                                     "(default 2 when the ranks are even and at least 4, else 1)")
      ->check(dpt::integer_in(1, dpt::kMaxRanks));
  app.add_option("--link-intra", f.link_intra, "--plan: link preset inside a node (chapter 08's fast tier)")
      ->check(CLI::IsMember(dpt::link_preset_names()))->capture_default_str();
  app.add_option("--link-inter", f.link_inter, "--plan: link preset between nodes (chapter 08's slow tier)")
      ->check(CLI::IsMember(dpt::link_preset_names()))->capture_default_str();
  app.add_option("--gflops", f.gflops, "--plan: one rank's compute rate in GFLOP/s (default: measured once here)")
      ->check(dpt::number_in(0, 1e9));
  app.add_option("--run-top", f.run_top, "--plan: train the K best layouts this build can run, a few steps each, "
                                         "and compare predicted with measured step times")
      ->check(dpt::integer_in(1, 64));
}

std::string plan_flags_problem(const PlanFlags& f, int world) {
  if (!f.plan && f.run_top > 0) return "--run-top needs --plan: it runs the plan's best layouts";
  if (!f.plan && f.memory_mib > 0) return "--memory-mib needs --plan: it is the planner's budget";
  if (!f.plan && (f.nodes > 0 || f.gflops > 0)) return "--nodes and --gflops need --plan: they describe the planner's machine";
  if (f.nodes > 0 && world % f.nodes != 0)
    return "--nodes " + std::to_string(f.nodes) + " does not divide the " + dpt::ranks_phrase(world);
  return "";
}

namespace dpt::ch15 {

std::string runnable_problem(const PlanLayout& l) {
  // One line per axis this build cannot train yet.
  if (l.zero > 0) return "not runnable in this build: ZeRO over dp (chapter 15 averages whole gradients)";
  return "";
}

namespace {
// --run-top runs layouts whose predicted steps differ by at least this factor:
// the measured steps of rank threads on shared cores vary by ~10 % run to run.
constexpr double kPlanApart = 1.25;

std::vector<double> plan_ranks_of(const std::vector<double>& x) {  // 1-based, ties: their mean rank
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&x](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) rank[order[k]] = (double(i) + double(j)) / 2 + 1;
    i = j + 1;
  }
  return rank;
}

std::string plan_seconds_text(double s) { return s < 1e-3 ? fixed(s * 1e6, 1) + " us" : fixed(s * 1e3, 3) + " ms"; }

std::string plan_memory_text(const RankMemory& m) {
  return format_bytes(m.total()) + " (" + format_bytes(m.params) + " + " + format_bytes(m.grads) + " + " +
         format_bytes(m.state) + " + " + format_bytes(m.activations) + ")";
}
}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = plan_ranks_of(a), rb = plan_ranks_of(b);
  const double n = double(ra.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i)
    sab += (ra[i] - ma) * (rb[i] - mb), saa += (ra[i] - ma) * (ra[i] - ma), sbb += (rb[i] - mb) * (rb[i] - mb);
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : std::nan("");
}

void plan_section(ModelChapterRun& run, const PlanFlags& flags, const PlanModel& model, const PlanMachine& machine,
                  const PlanTrainer& train) {
  Context& ctx = run.ctx;
  const bool root = ctx.is_root();
  const double budget = flags.memory_mib * 1024 * 1024;
  const std::vector<PlanEntry> plan = make_plan(model, ctx.world, machine, budget);
  if (root) {
    std::cout << "ch15 plan: " << plan.size() << " layouts of " << ranks_phrase(ctx.world) << " that divide the model, "
              << machine.per_node << " ranks per node (" << machine.intra.describe() << " inside, "
              << machine.inter.describe() << " between), " << fixed(machine.gflops, 2) << " GFLOP/s per rank, "
              << (budget > 0 ? "budget " + format_bytes(budget) + " per rank" : "no memory budget") << "\n";
    Table t("ch15 plan: best first (memory: the fullest rank's parameters + gradients + optimizer state + activations)",
            {"#", "layout", "memory per rank", "predicted step", "dominates", "fits"});
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const PlanEntry& e = plan[i];
      t.add_row({std::to_string(i + 1), e.layout.name(), plan_memory_text(e.memory), plan_seconds_text(e.step.total()),
                 e.step.dominant(), e.overflow.empty() ? "yes" : "no: " + e.overflow + " overflows"});
    }
    t.print(std::cout);
  }
  if (flags.run_top == 0) return;

  // --run-top K: the best K that fit and this build can run, each predicted at least kPlanApart slower than the
  // one before it (an order among layouts the planner predicts alike is not its claim: timing noise would decide
  // it); the others met on the way are listed, not dropped.
  std::vector<const PlanEntry*> chosen;
  std::vector<std::pair<std::string, int>> skipped;  // why, how many: counted, not dropped
  for (const PlanEntry& e : plan) {
    if (int(chosen.size()) == flags.run_top || !e.overflow.empty()) break;
    std::string why = runnable_problem(e.layout);
    if (why.empty() && !chosen.empty() && e.step.total() < chosen.back()->step.total() * kPlanApart)
      why = "predicted within " + fixed(100 * (kPlanApart - 1), 0) + " % of a layout run: the planner's ties, " +
            "which timing noise would order";
    if (why.empty()) {
      chosen.push_back(&e);
      continue;
    }
    auto same = std::find_if(skipped.begin(), skipped.end(), [&why](const auto& s) { return s.first == why; });
    if (same == skipped.end())
      skipped.push_back({why, 1});
    else
      ++same->second;
  }
  if (root)
    for (const auto& [why, n] : skipped) std::cout << "  not run, " << n << " layout" << (n > 1 ? "s" : "") << ": " << why << "\n";
  std::vector<double> predicted, measured;
  for (const PlanEntry* e : chosen) {
    predicted.push_back(e->step.total());
    measured.push_back(train(e->layout));  // collective: every rank trains the same layout
  }
  const int K = int(chosen.size());
  if (root) {
    Table t("ch15 --run-top " + std::to_string(flags.run_top) + ": predicted and measured step (simulated link clock)",
            {"layout", "predicted", "measured", "predicted rank", "measured rank"});
    const std::vector<double> rp = plan_ranks_of(predicted), rm = plan_ranks_of(measured);
    for (int i = 0; i < K; ++i)
      t.add_row({chosen[std::size_t(i)]->layout.name(), plan_seconds_text(predicted[std::size_t(i)]),
                 plan_seconds_text(measured[std::size_t(i)]), fmt(rp[std::size_t(i)], 3), fmt(rm[std::size_t(i)], 3)});
    t.print(std::cout);
  }
  const std::string what = "Spearman's rank correlation of predicted and measured steps over the layouts run";
  if (K < 3) {
    if (K >= 2 && root) std::cout << "Spearman's rho = " << fixed(spearman(predicted, measured), 3) << "\n";
    run.verdicts.cannot_fail(what, "with " + std::to_string(K) + " layouts run (try --run-top 3): two orders of 2 "
                                   "agree or disagree by chance half the time");
    return;
  }
  const double rho = spearman(predicted, measured);
  if (root) std::cout << "Spearman's rho = " << fixed(rho, 3) << " over " << K << " layouts\n";
  run.verdicts.at_least(what, rho, 0.5,
                        "0.5: on 3 layouts, the planner's order or one neighbouring pair swapped; an order "
                        "by chance passes half the time on 3, rarer on more, an inverted one never");
}

}  // namespace dpt::ch15
