// fault_plan.cpp — --fail and --join: parsing, the plan's questions, and the
// check against a run's shape (fault_plan.h).
#include "dpt/fault_plan.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "dpt/check.h"
#include "dpt/grid.h"
#include "dpt/launch.h"
#include "dpt/options.h"

namespace dpt {

namespace {
const char* const kFailForm = "expects RANK@STEP[:crash|freeze|slow[:FACTOR]|bitflip], e.g. 2@5 or 1@3:slow:8";
const char* const kJoinForm = "expects RANK@STEP, e.g. 2@9";

// A whole decimal number in [0, limit], or -1.
int64_t fault_number(const std::string& text, int64_t limit) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int64_t value = std::stoll(text);
  return value <= limit ? value : -1;
}

// Splits on ':' ("1@3:slow:8" -> "1@3", "slow", "8").
std::vector<std::string> fault_fields(const std::string& value) {
  std::vector<std::string> out(1);
  for (char c : value) {
    if (c == ':')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

bool is_out_event(FaultKind k) { return k == FaultKind::Crash || k == FaultKind::Freeze; }
}  // namespace

const char* fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::Crash: return "crash";
    case FaultKind::Freeze: return "freeze";
    case FaultKind::Slow: return "slow";
    case FaultKind::BitFlip: return "bitflip";
    case FaultKind::Join: return "join";
  }
  return "?";
}

FaultEvent parse_fault_event(const std::string& value, bool join) {
  const char* form = join ? kJoinForm : kFailForm;
  const std::vector<std::string> fields = fault_fields(value);
  const std::string& where = fields[0];
  const size_t at = where.find('@');
  DPT_CHECK(at != std::string::npos, form << ", got '" << value << "' (no '@')");
  FaultEvent e;
  const int64_t rank = fault_number(where.substr(0, at), kMaxRanks - 1);
  const int64_t step = fault_number(where.substr(at + 1), int64_t(1) << 40);
  DPT_CHECK(rank >= 0, form << ", got '" << value << "' (RANK: an integer from 0 to " << kMaxRanks - 1 << ")");
  DPT_CHECK(step >= 0, form << ", got '" << value << "' (STEP: a non-negative integer)");
  e.rank = int(rank), e.step = step;
  e.flag = std::string(join ? "--join " : "--fail ") + value;
  if (join) {
    DPT_CHECK(fields.size() == 1, form << ", got '" << value << "' (a join has no kind)");
    e.kind = FaultKind::Join;
    return e;
  }
  const std::string kind = fields.size() > 1 ? fields[1] : "crash";
  if (kind == "crash") e.kind = FaultKind::Crash;
  else if (kind == "freeze") e.kind = FaultKind::Freeze;
  else if (kind == "slow") e.kind = FaultKind::Slow;
  else if (kind == "bitflip") e.kind = FaultKind::BitFlip;
  else DPT_FAIL(form << ", got '" << value << "' (unknown kind '" << kind << "')");
  const size_t allowed = e.kind == FaultKind::Slow ? 3 : 2;
  DPT_CHECK(fields.size() <= allowed, form << ", got '" << value << "' (too many ':' fields)");
  if (e.kind == FaultKind::Slow) {
    e.factor = 4;
    if (fields.size() == 3) {
      char* end = nullptr;
      e.factor = std::strtod(fields[2].c_str(), &end);
      DPT_CHECK(!fields[2].empty() && end == fields[2].c_str() + fields[2].size() && std::isfinite(e.factor) &&
                    e.factor > 1 && e.factor <= 1000,
                form << ", got '" << value << "' (FACTOR: a number above 1 and at most 1000)");
    }
  }
  return e;
}

void add_fault_flags(CLI::App& app, FaultFlags& flags) {
  auto check = [](bool join) {
    return validator_of(join ? "RANK@STEP" : "RANK@STEP[:KIND]",
                        [join](const std::string& v) { parse_fault_event(v, join); });
  };
  app.add_option("--fail", flags.fail,
                 "Rank RANK fails at step STEP: crash (default), freeze, slow[:FACTOR] or bitflip (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(check(false));
  app.add_option("--join", flags.join, "Rank RANK (out: crashed, frozen, or a spare) joins at step STEP (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(check(true));
}

FaultPlan::FaultPlan(const FaultFlags& flags) {
  for (const std::string& v : flags.fail) events_.push_back(parse_fault_event(v, false));
  for (const std::string& v : flags.join) events_.push_back(parse_fault_event(v, true));
  std::stable_sort(events_.begin(), events_.end(), [](const FaultEvent& a, const FaultEvent& b) {
    return a.step != b.step ? a.step < b.step : a.rank < b.rank;
  });
}

const FaultEvent* FaultPlan::at(int rank, int64_t step) const {
  for (const FaultEvent& e : events_)
    if (e.rank == rank && e.step == step) return &e;
  return nullptr;
}

std::vector<FaultEvent> FaultPlan::at_step(int64_t step) const {
  std::vector<FaultEvent> out;
  for (const FaultEvent& e : events_)
    if (e.step == step) out.push_back(e);
  return out;
}

bool FaultPlan::in_run(int rank, int64_t step) const {
  bool in = true, first = true;
  for (const FaultEvent& e : events_) {
    if (e.rank != rank) continue;
    if (first && e.kind == FaultKind::Join) in = false;  // a spare until its join
    first = false;
    if (e.step > step) break;
    if (is_out_event(e.kind)) in = false;
    if (e.kind == FaultKind::Join) in = true;
  }
  return in;
}

double FaultPlan::slowdown(int rank, int64_t step) const {
  double factor = 1;
  for (const FaultEvent& e : events_)
    if (e.rank == rank && e.step <= step && e.kind == FaultKind::Slow) factor = e.factor;
  return factor;
}

std::string fault_plan_problem(const FaultPlan& plan, int world, int64_t steps) {
  const std::vector<FaultEvent>& events = plan.events();
  for (const FaultEvent& e : events) {
    if (e.rank >= world)
      return e.flag + ": rank " + std::to_string(e.rank) + ", but the run has " + ranks_phrase(world) + " (0 to " +
             std::to_string(world - 1) + ")";
    if (e.step >= steps)
      return e.flag + ": step " + std::to_string(e.step) + ", but the run has " + std::to_string(steps) +
             " steps (0 to " + std::to_string(steps - 1) + ")";
  }
  // Each rank's events in step order, one after another.
  for (int r = 0; r < world; ++r) {
    const FaultEvent* before = nullptr;
    bool in = true;
    for (const FaultEvent& e : events) {
      if (e.rank != r) continue;
      if (before == nullptr && e.kind == FaultKind::Join) in = false;  // a spare
      if (before != nullptr && before->step == e.step)
        return e.flag + ": rank " + std::to_string(r) + " already has " + before->flag +
               " at that step (one event per rank per step)";
      if (e.kind == FaultKind::Join && in)
        return e.flag + ": rank " + std::to_string(r) + " is in the run then: a join is for a rank that crashed or " +
               "froze before, or a spare (a rank whose first event is its join)";
      if (e.kind != FaultKind::Join && !in)
        return e.flag + ": rank " + std::to_string(r) + " is out of the run then (after " + before->flag + ")";
      if (is_out_event(e.kind)) in = false;
      if (e.kind == FaultKind::Join) in = true;
      before = &e;
    }
  }
  // Membership changes only at an event's step.
  std::vector<int64_t> changes{0};
  for (const FaultEvent& e : events) changes.push_back(e.step);
  for (int64_t step : changes) {
    int in = 0;
    for (int r = 0; r < world; ++r) in += plan.in_run(r, step) ? 1 : 0;
    if (in == 0)
      return "--fail/--join: no rank is left in the run at step " + std::to_string(step) +
             ": at least one must be in at every step";
  }
  return "";
}

void kill_this_process(const std::string& program, int rank, int world, const FaultEvent& crash) {
  // One write, flushed: SIGKILL leaves no chance to flush anything later.
  std::fprintf(stderr, "%s: rank %d of %d: %s: this process kills itself (SIGKILL) at the start of step %lld\n",
               program.c_str(), rank, world, crash.flag.c_str(), static_cast<long long>(crash.step));
  std::fflush(stderr);
  std::raise(SIGKILL);
  std::_Exit(137);  // SIGKILL cannot be caught or blocked: never reached
}

}  // namespace dpt
