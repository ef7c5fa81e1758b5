// tour.cpp — chapter 06's harness: settings, metrics, verdicts on one run
// (provided, see tour.h).
#include "tour.h"

#include <cmath>
#include <iostream>
#include <map>

#include "dpt/data_parallel.h"
#include "dpt/holes.h"

namespace dpt::ch06 {

Setting make_setting(const Options& base, const std::string& optimizer, bool parameters, int64_t every,
                     int64_t warmup, bool average_state, float adam_lr, int64_t steps) {
  Setting s;
  s.o = base;
  s.o.steps = steps;
  s.o.optimizer = optimizer;
  if (optimizer.rfind("adam", 0) == 0 || optimizer == "lamb") s.o.lr = adam_lr;  // steps of ~lr per weight
  s.schedule = Schedule{parameters, every, warmup, parameters && average_state};
  s.name = parameters ? "params H=" + std::to_string(every) + (warmup ? " W=" + std::to_string(warmup) : "") +
                            (s.schedule.average_state ? " +state" : "") + " " + optimizer
                      : "grads " + optimizer;
  if (steps != base.steps) s.name += ", " + std::to_string(steps) + " steps";
  return s;
}

MLP run_setting(Context& ctx, const Dataset& data, Setting& s) {
  MLP replica = make_replica(ctx, s.o);
  const std::string hole = unwritten_hole(ctx.comm, [&] { s.run = train_local_sgd(ctx, s.o, data, replica, s.schedule); });
  if (!hole.empty()) {
    s.written = false;
    if (ctx.is_root()) std::cout << "  " << s.name << ": not written yet (" << hole << ")\n";  // even with --quiet
    return replica;
  }
  s.weights = flatten(replica.parameters());
  return replica;
}

void write_metrics(const std::string& path, const std::vector<Setting>& settings, const Setting& main) {
  MetricsWriter metrics(path);
  if (!metrics.enabled()) return;
  int64_t steps = 0;
  for (const Setting& s : settings) steps = std::max(steps, int64_t(s.run.losses.size()));
  for (int64_t t = 0; t < steps; ++t) {
    std::map<std::string, double> values;
    for (const Setting& s : settings)
      if (t < int64_t(s.run.losses.size())) {
        values["loss:" + s.name] = s.run.losses[std::size_t(t)];
        values["drift:" + s.name] = s.run.drift[std::size_t(t)];
        if (s.name == main.name) values["loss"] = s.run.losses[std::size_t(t)], values["drift"] = s.run.drift[std::size_t(t)];
      }
    metrics.write(t, values);
  }
}

double weight_gap(const Setting& a, const Setting& b) {
  if (!a.written || !b.written || a.weights.size() != b.weights.size()) return std::nan("");
  double worst = 0;
  for (std::size_t i = 0; i < a.weights.size(); ++i) {
    double d = std::fabs(double(a.weights[i]) - double(b.weights[i]));
    worst = std::isnan(d) || std::isnan(worst) ? std::nan("") : std::max(worst, d);
  }
  return worst;
}

double max_over(const std::vector<double>& xs) {
  double m = 0;
  for (double x : xs) m = std::isnan(x) || std::isnan(m) ? std::nan("") : std::max(m, x);
  return m;
}

namespace {
// The schedule, written out independently of the hole: steps after which
// parameters are averaged, W + H − 1, W + 2H − 1, … below T.
std::vector<int64_t> expected_averagings(const Setting& s) {
  std::vector<int64_t> steps;
  if (!s.schedule.parameters) return steps;
  for (int64_t at = s.schedule.warmup + s.schedule.every - 1; at < s.o.steps; at += s.schedule.every) steps.push_back(at);
  return steps;
}

int64_t expected_gradient_steps(const Setting& s) {
  return s.schedule.parameters ? std::min(s.schedule.warmup, s.o.steps) : s.o.steps;
}
}  // namespace

void add_run_verdicts(Verdicts& v, const Setting& s, int64_t psi, int world) {
  const LocalSgdRun& r = s.run;
  std::vector<int64_t> want = expected_averagings(s);
  if (s.schedule.parameters)
    v.holds(s.name + ": parameters averaged at the steps the contract gives (" + std::to_string(want.size()) +
                " times), gradients in the W warm-up steps",
            r.averaged_at == want && r.gradient_steps == expected_gradient_steps(s),
            "averaged " + std::to_string(r.averaged_at.size()) + " times" +
                (r.averaged_at.empty() ? "" : ", first after step " + std::to_string(r.averaged_at.front())) +
                ", gradients " + std::to_string(r.gradient_steps) + " times");
  const std::string& opt = s.o.optimizer;
  const bool velocity = opt == "momentum" || opt == "lars", moments = opt.rfind("adam", 0) == 0 || opt == "lamb";
  double state_floats = !s.schedule.average_state ? 0 : velocity ? 1 : moments ? 2 : 0;
  double expected = 4.0 * double(psi) * (double(expected_gradient_steps(s)) + double(want.size()) * (1 + state_floats));
  v.near(s.name + ": all-reduce bytes per rank (traffic log)", double(r.traffic.collective_bytes("all_reduce", 0)),
         expected, 0, "4*Psi per averaging (and per optimizer state float); nothing else goes through all_reduce");
  int64_t calls = r.traffic.collective_calls("all_reduce", 0), payloads = expected_gradient_steps(s) + int64_t(want.size());
  v.holds(s.name + ": all-reduce calls per rank, every tensor of an averaging in one call (" +
              std::to_string(payloads) +
              (s.schedule.average_state ? "; or " + std::to_string(payloads + int64_t(want.size())) +
                                              " with the state in an extra call of its own per averaging"
                                        : "") +
              ")",
          calls == payloads || (s.schedule.average_state && calls == payloads + int64_t(want.size())),
          "saw " + std::to_string(calls));
  if (!want.empty() && world == 1)  // one replica is its own mean
    v.cannot_fail(s.name + ": replicas identical right after each averaging", on_one_rank(4));
  else if (!want.empty())
    v.at_most(s.name + ": replicas identical right after each averaging, max |w_r - w_0|", r.spread_after_averaging, 0,
              "every rank receives the same mean: the same bits");
}

}  // namespace dpt::ch06
