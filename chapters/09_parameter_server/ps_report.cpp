// ps_report.cpp — the lecture's reports (spec: ps_report.h).
#include "ps_report.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>

#include "dpt/data_parallel.h"
#include "dpt/launch.h"

namespace dpt::ch09 {

std::string roles_text(const Roles& roles) {
  std::string text;
  for (int s = 0; s < roles.servers; ++s) {
    Range r = roles.shard(s);
    text += str("server ", s, " (rank ", roles.server_rank(s), "): elements [", r.begin, ", ", r.end, "), ",
                format_bytes(4.0 * double(r.size())), "; runs SGD on them\n");
  }
  return text + str("workers 0 … ", roles.workers - 1, " (ranks ", roles.servers, " … ",
                    roles.servers + roles.workers - 1, "): each computes a gradient on its own samples, pushes "
                    "slice s to server s, pulls every shard back");
}

// ----------------------------------------------------------------------------
// the step check, replayed where the weights were seen, judged on rank 0

StepCheck share_step_check(Context& ctx, const Roles& roles, const StepRecorder& recorder, bool verify,
                           const Options& o, const Dataset& data) {
  constexpr int kCheckTag = 94;
  StepCheck check;
  if (!verify) return check;
  // difference, worst step, start difference, checked, steps run, first checked; raw difference, kinks
  std::vector<float> wire(9);
  if (ctx.rank == roles.worker_rank(0)) {
    check = recorder.replay(o, data, o.batch * roles.workers);
    wire = {float(check.difference), float(check.worst_step), float(check.start_difference),
            float(check.checked.size()), float(check.steps_run), float(check.checked.empty() ? -1 : check.checked[0]),
            float(check.raw_difference), float(check.kink_units), float(check.kink_samples)};
    ctx.comm.send(wire.data(), int64_t(wire.size()), 0, kCheckTag);
  } else if (ctx.is_root()) {
    ctx.comm.recv(wire.data(), int64_t(wire.size()), roles.worker_rank(0), kCheckTag);
    check.difference = wire[0];
    check.worst_step = int64_t(wire[1]);
    check.start_difference = wire[2];
    for (int64_t i = 0; i < int64_t(wire[3]); ++i) check.checked.push_back(i == 0 ? int64_t(wire[5]) : i);
    check.steps_run = int64_t(wire[4]);
    check.raw_difference = wire[6];
    check.kink_units = int64_t(wire[7]), check.kink_samples = int64_t(wire[8]);
  }
  return check;
}

void add_ps_step_check_verdicts(Verdicts& v, const StepCheck& c, int workers) {
  if (!c.checked.empty() && c.checked.front() == 0)
    v.at_most("the workers started from the flags' model: max |w - w_flags| in the first worker's first pull",
              c.start_difference, 0,
              c.start_difference == 0 ? "the servers hand out the model the flags ask for, bit for bit"
                                      : "the parameters the first worker pulled before step 0 are not the flags' model");
  const bool ok = std::isfinite(c.difference) && c.difference <= kStepGradientTolerance;
  v.at_most(str("synced gradient = one device's on the global batch: max (|g - g_single| - kink allowance) / max "
                "|g_single| over ", c.checked.size(), " of ", c.steps_run, " steps"),
            c.difference, kStepGradientTolerance,
            ok ? "g = (w_k - w_k+1)/lr read back on the first worker; float sums in another order (~1e-6 relative)" +
                     kink_note(c)
               : str("at step ", c.worst_step, ", far above float rounding: the servers' step was not one device's "
                     "SGD step on the ", workers, " workers' batches as one"));
}

// ----------------------------------------------------------------------------
// bytes per server against W·Ψ/S; the ring's per rank; the link's time

void bytes_section(const Narrator& say, Context& ctx, const Roles& roles, const PsRun& run, Verdicts& v,
                   Table& summary) {
  const std::vector<std::vector<int64_t>> m = run.traffic.matrix();
  const int W = roles.workers, S = roles.servers, N = S + W;
  const double steps = double(run.version), psi = 4.0 * double(roles.count);
  LinkModel link = effective_link(ctx.options);
  std::string link_name = link.enabled() ? "--link: " + link.describe() : "ethernet (no --link given)";
  if (!link.enabled()) link = link_preset("ethernet");
  auto link_time = [&](int64_t messages, double bytes) {
    return double(messages) * link.latency_us * 1e-6 + link.transfer_seconds(int64_t(bytes));
  };
  Table table("bytes per step (sync, " + fixed(steps, 0) + " steps); link time on " + link_name,
              {"who", "in per step", "out per step", "theory in = out", "link time per step"});
  bool exact = true, only_roles = true;
  std::string first_seen;
  for (int s = 0; s < S; ++s) {
    const double shard = 4.0 * double(roles.shard(s).size());
    double in = 0, out = 0;
    for (int w = 0; w < W; ++w) {
      in += double(m[std::size_t(roles.worker_rank(w))][std::size_t(s)]);
      out += double(m[std::size_t(s)][std::size_t(roles.worker_rank(w))]);
    }
    exact = exact && in == steps * W * shard && out == (steps + 1) * W * shard;  // + every worker's start
    if (s == 0) first_seen = format_bytes(in / steps) + " in, " + format_bytes((out - W * shard) / steps) + " out";
    table.add_row({"server " + std::to_string(s), format_bytes(in / steps), format_bytes((out - W * shard) / steps),
                   "W*Psi/S = " + format_bytes(W * shard), fixed(link_time(W, W * shard) * 1e3, 3) + " ms"});
  }
  for (int a = 0; a < N; ++a)
    for (int b = 0; b < N; ++b)
      if (m[std::size_t(a)][std::size_t(b)] > 0 && (a < S) == (b < S)) only_roles = false;
  table.add_row({"each worker", format_bytes(psi), format_bytes(psi), "Psi = " + format_bytes(psi),
                 fixed(link_time(S, psi) * 1e3, 3) + " ms"});
  const double ring = 2.0 * (N - 1) / N * psi;
  table.add_row({"ring, each of " + std::to_string(N) + " ranks", format_bytes(ring), format_bytes(ring),
                 "2(N-1)/N*Psi", fixed(link_time(2 * (N - 1), ring) * 1e3, 3) + " ms"});
  if (say.enabled()) table.print(std::cout);
  say.say("The busiest link is a server's: W/S = " + fmt(double(W) / S, 3) + " Psi each way per step, against ~2 Psi "
          "for every rank of a ring. Doubling the workers doubles it; S servers divide it by S.");
  v.holds("each server moves W x its shard per step, in and out (+ every worker's start), from the traffic log",
          exact, "server 0: " + first_seen + " per step");
  v.holds("messages only between a worker and a server", only_roles,
          only_roles ? "" : "two servers or two workers talked to each other");
  summary.add_row({"bytes per step through server 0 (theory W*Psi/S)", first_seen});
  summary.add_row({"ring, per rank per step: 2(N-1)/N*Psi", format_bytes(ring)});
}

// ----------------------------------------------------------------------------
// staleness

void write_sync_metrics(Context& ctx, const Options& o, const PsRun& run, int workers) {
  std::vector<float> sum(std::size_t(o.steps), 0.0f);  // servers add nothing
  for (std::size_t k = 0; k < run.losses.size() && k < sum.size(); ++k) sum[k] = float(run.losses[k]);
  ctx.comm.all_reduce(sum.data(), int64_t(sum.size()), ReduceOp::Sum);
  if (!ctx.is_root()) return;
  MetricsWriter metrics(o.metrics);  // committed here; the harness appends the held-out line after it
  for (std::size_t k = 0; k < sum.size(); ++k) metrics.write(int64_t(k), {{"loss", sum[k] / float(workers)}});
}

std::string staleness_summary(const std::vector<int64_t>& staleness) {
  if (staleness.empty()) return "none";
  double sum = 0;
  for (int64_t s : staleness) sum += double(s);
  return "mean " + fixed(sum / double(staleness.size()), 2) + ", max " +
         std::to_string(*std::max_element(staleness.begin(), staleness.end()));
}

std::vector<int64_t> implied_staleness(Mode mode, const std::vector<int>& order) {
  std::vector<int64_t> out;
  std::vector<int64_t> read;  // per worker: the update count of the parameters it holds
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t v = std::size_t(order[i]);
    if (read.size() <= v) read.resize(v + 1, 0);
    out.push_back(mode == Mode::Sync ? 0 : int64_t(i) - read[v]);
    read[v] = int64_t(i) + 1;  // its answer carries the shard after this push
  }
  return out;
}

std::string staleness_text(const std::vector<int64_t>& measured, const std::vector<int64_t>& implied) {
  std::map<int64_t, int64_t> histogram;
  for (int64_t s : measured) ++histogram[s];
  std::string text = "staleness (updates between a worker's pull and its push being applied), pushes per value:\n ";
  int shown = 0;
  for (auto [value, count] : histogram) {
    if (++shown > 16) {
      text += " …";
      break;
    }
    text += " " + std::to_string(value) + ": " + std::to_string(count);
  }
  return text + "\nmeasured " + staleness_summary(measured) + "; the arrival order implies " +
         staleness_summary(implied);
}

int64_t largest_lead(const std::vector<int>& order, int workers) {
  std::vector<int64_t> completed(std::size_t(workers), 0);
  int64_t lead = 0;
  for (int w : order) {
    ++completed[std::size_t(w)];
    auto [lo, hi] = std::minmax_element(completed.begin(), completed.end());
    lead = std::max(lead, *hi - *lo);
  }
  return lead;
}

// ----------------------------------------------------------------------------
// accuracy

MLP model_of(const Options& o, const std::vector<float>& params) {
  MLP model = build_model(o, Device::host());
  std::vector<Tensor> tensors = model.parameters();
  unflatten(params, tensors);
  return model;
}

double accuracy(const MLP& model, const Dataset& data, const HeldOut& held_out) {
  return held_out.enabled() ? evaluate(model, held_out.data).accuracy : evaluate(model, data).accuracy;
}

void add_ssp_bound_verdict(Verdicts& v, const std::vector<int>& order, int workers, int max_staleness,
                           double slowdown, double model_time) {
  // A fast worker gains 1 − 1/X steps on the straggler per step time: the
  // bound's s + 1 is reached well within 2(s + 1)·X/(X − 1) + X of them.
  const bool reaches_bound =
      slowdown > 1 && model_time >= 2.0 * (max_staleness + 1) * slowdown / (slowdown - 1) + slowdown;
  if (reaches_bound)  // the fast workers had the time to reach the bound
    v.near("ssp: steps the fastest worker finished beyond the slowest = max staleness + 1",
           double(largest_lead(order, workers)), double(max_staleness + 1), 0,
           "it may start a step while s ahead and finishes it one further; a straggler takes it there");
  else
    v.at_most("ssp: steps any worker finished beyond the slowest, at most max staleness + 1",
              double(largest_lead(order, workers)), double(max_staleness + 1),
              "it may start a step while s ahead and finishes it one further");
}

// ----------------------------------------------------------------------------
// sync rounds: where apply_push closed each

std::string round_closes_text(const std::vector<bool>& applied, const std::vector<int>& order, int workers,
                              bool& ok) {
  const std::size_t W = std::size_t(workers), rounds = order.size() / W;
  int64_t last_not_highest = 0;  // rounds whose last push was not worker W−1's
  for (std::size_t r = 0; r < rounds; ++r) {
    if (order[r * W + W - 1] != workers - 1) ++last_not_highest;
    for (std::size_t j = 0; j < W && r * W + j < applied.size(); ++j) {
      const bool last = j + 1 == W;
      if (applied[r * W + j] == last) continue;
      std::string who;
      for (std::size_t k = 0; k < W; ++k) who += (k ? ", " : "") + std::to_string(order[r * W + k]);
      ok = false;
      if (!last) {
        std::string to_come;
        for (std::size_t k = j + 1; k < W; ++k) to_come += (k > j + 1 ? ", " : "") + std::to_string(order[r * W + k]);
        return str("round ", r, " (pushes from workers ", who, ", in that order): apply_push returned true on "
                   "push ", j + 1, " of ", W, " (worker ", order[r * W + j], "'s), with worker(s) ", to_come,
                   " still to come. A round closes when all W pushes are in, whatever their order");
      }
      return str("round ", r, " (pushes from workers ", who, ", in that order): apply_push returned false on the "
                 "round's last push (worker ", order[r * W + j], "'s): all ", W,
                 " pushes were in, so the round had to close there, whatever their order");
    }
  }
  ok = applied.size() == order.size();
  if (!ok) return str("apply_push ran ", applied.size(), " times for ", order.size(), " pushes");
  return str(rounds, " rounds, each closed on its last push; in ", last_not_highest,
             " of them the last was not worker ", workers - 1, "'s");
}

// ----------------------------------------------------------------------------
// the straggler race

void race_section(const Narrator& say, const std::vector<RaceLane>& lanes, int workers, int max_staleness,
                  double slowdown, Verdicts& v, Table& summary) {
  const RaceLane& sync = lanes.front();
  Table table("the same time on the step-time clock (" + fixed(sync.model_time, 0) + " normal steps)",
              {"mode", "pushes", "wall s", "pushes/s", "vs sync: theory", "measured", "staleness", "held-out acc."});
  for (const RaceLane& lane : lanes) {
    double theory = (double(lane.pushes) / lane.model_time) / (double(sync.pushes) / sync.model_time);
    double measured = (double(lane.pushes) / lane.seconds) / (double(sync.pushes) / sync.seconds);
    table.add_row({mode_name(lane.mode), std::to_string(lane.pushes), fixed(lane.seconds, 2),
                   fixed(double(lane.pushes) / lane.seconds, 1), fixed(theory, 2) + "x", fixed(measured, 2) + "x",
                   staleness_summary(lane.staleness), fixed(100 * lane.accuracy, 2) + "%"});
    summary.add_row({std::string(mode_name(lane.mode)) + " with the straggler: pushes/s, held-out acc.",
                     fixed(double(lane.pushes) / lane.seconds, 1) + ", " + fixed(100 * lane.accuracy, 2) + "%"});
    if (lane.mode == Mode::Ssp) add_ssp_bound_verdict(v, lane.order, workers, max_staleness, slowdown, sync.model_time);
  }
  if (say.enabled()) table.print(std::cout);
  say.say("theory: pushes per unit of the step-time clock, each worker on a device of its own; measured: wall "
          "time here, where rank threads share this machine's cores (more workers than cores: the fast workers' "
          "compute queues up, and async gains less than the clock says).");
  say.say("Sync waits for the straggler every step; async never waits, and pays in staleness; ssp lets the fast "
          "workers run s steps ahead, which absorbs a hiccup but not a worker that is always slow.");
}

}  // namespace dpt::ch09
