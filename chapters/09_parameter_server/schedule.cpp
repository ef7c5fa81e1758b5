// schedule.cpp — who is who, and the arrival order: in which order pushes
// reach the servers when each worker needs its own time per step (spec:
// ch09.h). A small event simulation: a worker computes for step_time[w],
// pushes, gets its answer at once (messages take no time here) and starts
// again — unless ssp makes it wait, which your ssp_must_wait decides. In
// sync every worker starts a round together, so its pushes arrive by step
// time; equal times tie, and a tie is broken by a draw from the seed, round
// by round, as a real network breaks it: not always in worker order.
#include <algorithm>

#include "ch09.h"
#include "dpt/check.h"

namespace dpt::ch09 {

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Sync: return "sync";
    case Mode::Async: return "async";
    case Mode::Ssp: return "ssp";
  }
  return "?";
}

Mode parse_mode(const std::string& name) {
  for (Mode m : {Mode::Sync, Mode::Async, Mode::Ssp})
    if (name == mode_name(m)) return m;
  throw Error("unknown mode '" + name + "': expected sync, async or ssp");
}

Range Roles::shard(int s) const {
  DPT_CHECK(s >= 0 && s < servers, "shard " << s << " of " << servers << " servers");
  const int64_t base = count / servers, extra = count % servers;
  const int64_t begin = s * base + std::min<int64_t>(s, extra);
  return {begin, begin + base + (s < extra ? 1 : 0)};
}

namespace {
// splitmix64: a fixed, portable mix of the seed, the round and the worker
// (std::shuffle's draws differ between standard libraries).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Simulated {
  std::vector<int> order;
  double makespan = 0;
};

Simulated simulate(Mode mode, const std::vector<double>& step_time, double horizon, int max_staleness,
                   uint64_t seed) {
  const int workers = int(step_time.size());
  DPT_CHECK(workers >= 1, "arrival_order: no workers");
  for (double t : step_time) DPT_CHECK(t > 0, "arrival_order: a step must take some time, got " << t);
  const double slack = 1e-9 * std::max(1.0, horizon);  // times are sums of step times: allow rounding
  Simulated out;
  if (mode == Mode::Sync) {  // every round waits for the slowest worker
    const double slowest = *std::max_element(step_time.begin(), step_time.end());
    const int64_t rounds = int64_t((horizon + slack) / slowest);
    std::vector<int> round(static_cast<std::size_t>(workers));
    for (int64_t r = 0; r < rounds; ++r) {
      std::vector<uint64_t> draw(static_cast<std::size_t>(workers));
      for (int w = 0; w < workers; ++w) {
        round[std::size_t(w)] = w;
        draw[std::size_t(w)] = mix(mix(mix(seed) ^ uint64_t(r)) ^ uint64_t(w));
      }
      std::sort(round.begin(), round.end(), [&](int a, int b) {  // by finishing time, ties by the draw
        const double ta = step_time[std::size_t(a)], tb = step_time[std::size_t(b)];
        return ta != tb ? ta < tb : draw[std::size_t(a)] < draw[std::size_t(b)];
      });
      out.order.insert(out.order.end(), round.begin(), round.end());
    }
    out.makespan = double(rounds) * slowest;
    return out;
  }
  std::vector<int64_t> completed(std::size_t(workers), 0);
  std::vector<double> finish(std::size_t(workers), -1);  // when its current step ends; -1: waiting
  double now = 0;
  auto start_whoever_may = [&] {
    for (int w = 0; w < workers; ++w)
      if (finish[std::size_t(w)] < 0 && (mode == Mode::Async || !ssp_must_wait(completed, w, max_staleness)))
        finish[std::size_t(w)] = now + step_time[std::size_t(w)];
  };
  start_whoever_may();
  for (;;) {
    int next = -1;
    for (int w = 0; w < workers; ++w)  // the earliest to finish; ties in worker order
      if (finish[std::size_t(w)] >= 0 && (next < 0 || finish[std::size_t(w)] < finish[std::size_t(next)] - slack))
        next = w;
    DPT_CHECK(next >= 0, "ssp with --max-staleness " << max_staleness << ": every worker must wait (steps finished: "
                         << [&] {
                              std::string s;
                              for (int64_t c : completed) s += (s.empty() ? "" : ", ") + std::to_string(c);
                              return s;
                            }()
                         << "), so nobody can ever move again: the slowest worker must always be allowed to go");
    if (finish[std::size_t(next)] > horizon + slack) break;
    now = finish[std::size_t(next)];
    out.order.push_back(next);
    out.makespan = now;
    ++completed[std::size_t(next)];
    finish[std::size_t(next)] = -1;
    start_whoever_may();
  }
  return out;
}
}  // namespace

std::vector<int> arrival_order(Mode mode, const std::vector<double>& step_time, double horizon, int max_staleness,
                               uint64_t seed) {
  return simulate(mode, step_time, horizon, max_staleness, seed).order;
}

double arrival_makespan(Mode mode, const std::vector<double>& step_time, double horizon, int max_staleness) {
  return simulate(mode, step_time, horizon, max_staleness, 0).makespan;
}

}  // namespace dpt::ch09
