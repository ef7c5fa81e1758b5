// sweep_compare.cpp — several optimizers' batch sweeps side by side, and the
// verdicts on the layer-wise ones where the plain one gives out (sweep_compare.h).
#include "sweep_compare.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <sstream>

namespace dpt::ch02 {

std::vector<std::string> parse_sweep_optimizers(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if (learning_rate_grid(name).empty())
      throw CLI::ValidationError("--sweep-optimizers", "'" + name + "' has no learning-rate grid; the sweep has one for " +
                                                           sweep_optimizers());
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw CLI::ValidationError("--sweep-optimizers", "'" + name + "' is listed twice");
    names.push_back(name);
  }
  if (names.size() < 2)
    throw CLI::ValidationError("--sweep-optimizers", "expects two or more names joined by ',', the plain one first "
                                                     "(e.g. sgd,lars,lamb), got '" + list + "'");
  return names;
}

std::vector<int64_t> batches_past_plain(const SweepResult& plain) {
  std::vector<int64_t> past;
  const double knee = plain.knee.critical_batch;
  for (const SweepPoint& p : plain.points)
    if (p.linear_diverged || (knee > 0 && double(p.batch) > knee)) past.push_back(p.batch);
  return past;
}

namespace {
const SweepPoint* point_at(const SweepResult& sweep, int64_t batch) {
  for (const SweepPoint& p : sweep.points)
    if (p.batch == batch) return &p;
  return nullptr;
}

std::string steps_cell(const SweepPoint* p) {
  if (p == nullptr) return "-";
  return p->tuned_steps > 0 ? std::to_string(p->tuned_steps) : "not reached";
}

std::string linear_cell(const SweepPoint* p) {
  if (p == nullptr) return "-";
  if (p->linear_diverged) return "div";
  return p->linear_steps > 0 ? std::to_string(p->linear_steps) : "not reached";
}
}  // namespace

std::string comparison_table(const std::vector<OptimizerSweep>& sweeps) {
  std::vector<std::string> headers = {"B"};
  for (const OptimizerSweep& s : sweeps)
    for (const char* column : {" steps", " lr", " linear"}) headers.push_back(s.optimizer + column);
  const std::string plain = sweeps.front().optimizer;
  Table table("tuned steps to the target and the rate that gave them; linear: the linear rule's steps (div: diverged); "
              "*: past " + plain + " (its linear rule diverged, or B > its critical batch)",
              headers);
  const std::vector<int64_t> past = batches_past_plain(sweeps.front().sweep);
  for (const SweepPoint& row : sweeps.front().sweep.points) {
    const bool marked = std::find(past.begin(), past.end(), row.batch) != past.end();
    std::vector<std::string> cells = {std::to_string(row.batch) + (marked ? "*" : "")};
    for (const OptimizerSweep& s : sweeps) {
      const SweepPoint* p = point_at(s.sweep, row.batch);
      cells.push_back(steps_cell(p));
      cells.push_back(p != nullptr && p->tuned_steps > 0 ? fmt(p->tuned_lr, 3) : "-");
      cells.push_back(linear_cell(p));
    }
    table.add_row(cells);
  }
  std::string text = table.str();
  for (const OptimizerSweep& s : sweeps)
    text += " " + s.optimizer + ": S_min = " + fmt(s.sweep.knee.min_steps, 4) + " steps, E_min = " +
            fmt(s.sweep.knee.min_samples, 4) + " samples, critical batch " + fmt(s.sweep.knee.critical_batch, 4) +
            " (" + fixed(s.sweep.seconds, 0) + " s)\n";
  return text;
}

void add_comparison_verdicts(Verdicts& v, const std::vector<OptimizerSweep>& sweeps) {
  const OptimizerSweep& plain = sweeps.front();
  const std::vector<int64_t> past = batches_past_plain(plain.sweep);
  for (std::size_t i = 1; i < sweeps.size(); ++i) {
    const OptimizerSweep& other = sweeps[i];
    const std::string held = other.optimizer + "'s tuned run reaches the target at every batch past " + plain.optimizer +
                             " (its linear rule diverged, or B > its critical batch)";
    if (past.empty()) {
      v.cannot_fail(held, "no batch up to " + std::to_string(plain.sweep.points.empty() ? 0 : plain.sweep.points.back().batch) +
                              " is past " + plain.optimizer + " (raise --sweep-max-batch)");
    } else {
      std::string seen, missed;
      for (int64_t b : past) {
        const SweepPoint* mine = point_at(other.sweep, b);
        const SweepPoint* theirs = point_at(plain.sweep, b);
        const bool reached = mine != nullptr && mine->tuned_steps > 0;
        if (!reached) missed += (missed.empty() ? "" : " ") + std::to_string(b);
        seen += (seen.empty() ? "B = " : ", ") + std::to_string(b) + ": " + steps_cell(mine) + " (" + plain.optimizer +
                " " + steps_cell(theirs) + ", its linear " + linear_cell(theirs) + ")";
      }
      v.holds(held, missed.empty(), missed.empty() ? seen : "not reached at B = " + missed + "; " + seen);
    }
    const double mine = other.sweep.knee.critical_batch, theirs = plain.sweep.knee.critical_batch;
    const std::string moved = other.optimizer + "'s critical batch / " + plain.optimizer + "'s";
    if (mine <= 0 || theirs <= 0)
      v.holds(moved + " (at least " + fmt(kKneeShiftFactor, 2) + ")", false,
              (theirs <= 0 ? plain.optimizer : other.optimizer) + " has no critical batch: fewer than 2 batches reached the target");
    else
      v.at_least(moved, mine / theirs, kKneeShiftFactor,
                 fmt(mine, 4) + " vs " + fmt(theirs, 4) + ": the knee moved up by at least one doubling of the batch, the "
                 "sweep's resolution");
  }
}

void run_optimizer_comparison(Lecture& lec, const MlpSweepFlags& flags) {
  std::vector<OptimizerSweep> sweeps;
  for (const std::string& name : parse_sweep_optimizers(flags.optimizers)) {
    lec.say.say("--- " + name);
    sweeps.push_back({name, run_batch_sweep(lec, flags, name)});
  }
  lec.say.section("3. The optimizers side by side");
  std::cout << comparison_table(sweeps);
  add_comparison_verdicts(lec.verdicts, sweeps);
}

}  // namespace dpt::ch02
