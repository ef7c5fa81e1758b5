// checks.cpp — exact sums and traffic patterns, computed from the run.
//
// The sums' oracle is a serial sum of small integers (exact in any order);
// the traffic's oracle is the threads/MPI traffic log, not the algorithms'
// own code.
#include "checks.h"

#include <cmath>
#include <mutex>

#include "ch08.h"
#include "cost_model.h"
#include "dpt/comm/watch.h"
#include "dpt/holes.h"
#include "dpt/timing.h"
#include "sweep.h"

namespace dpt::ch08 {

namespace {
float input(int rank, int64_t i) { return float((rank + 1) * 1000 + i % 997); }
}  // namespace

std::vector<SumCheck> check_sums(Context& ctx, int nodes) {
  std::vector<SumCheck> checks;
  for (const std::string& name : algorithm_names()) {
    SumCheck check;
    check.name = name;
    for (int64_t count : {1, 7, 1001}) {
      std::vector<float> data(static_cast<std::size_t>(count));
      for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = input(ctx.rank, i);
      const std::string hole = unwritten_hole(ctx.comm, [&] { run_algorithm(name, ctx.comm, data.data(), count, nodes); });
      if (!hole.empty()) {
        check.written = false;
        check.why = hole;
        break;
      }
      double worst = 0;
      for (int64_t i = 0; i < count; ++i) {
        double expected = 0;
        for (int r = 0; r < ctx.world; ++r) expected += input(r, i);
        double error = std::fabs(data[std::size_t(i)] - expected) / expected;
        if (!(error <= worst)) worst = error;  // a NaN stays
      }
      check.error = std::max(check.error, max_over_ranks(ctx.comm, worst));
    }
    checks.push_back(check);
  }
  return checks;
}

TrafficSeen traffic_of(Context& ctx, const std::string& name, int nodes, int64_t count) {
  std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  run_algorithm(name, ctx.comm, data.data(), count, nodes);
  TrafficSeen seen;
  seen.matrix = ctx.comm.gather_traffic().matrix();
  const int n = ctx.world, g = n / nodes;
  for (int a = 0; a < n; ++a) {
    int64_t across = 0;
    for (int b = 0; b < n; ++b) {
      int64_t bytes = seen.matrix[std::size_t(a)][std::size_t(b)];
      seen.total += bytes;
      if (a / g == b / g || bytes == 0) continue;
      across += bytes;
      if (a % g != b % g && seen.stray_across.empty())
        seen.stray_across = std::to_string(a) + " -> " + std::to_string(b);
    }
    seen.busiest_across = std::max(seen.busiest_across, across);
  }
  return seen;
}

double theory_total_bytes(const std::string& name, int n, int nodes, double s) {
  const int p = power_of_two_below(n);
  const double lg_p = std::log2(double(p));
  if (name == "ring") return 2.0 * (n - 1) * s;                           // 2(n-1) chunks of S/n per rank
  if (name == "recursive doubling") return p * lg_p * s + 2.0 * (n - p) * s;  // whole vectors, + the fold
  if (name == "halving-doubling") return 2.0 * (p - 1) * s + 2.0 * (n - p) * s;  // (p-1)/p S per phase per rank
  if (name == "binomial tree") return 2.0 * (n - 1) * s;                 // every rank but 0 sends up once, gets one down
  const int g = n / nodes;  // two-level: 2(G-1)/G S per rank inside, then G teams of K on S/G
  return 2.0 * n * (g - 1) / g * s + g * theory_total_bytes("halving-doubling", nodes, nodes, s / g);
}

std::string halving_doubling_pattern_problem(const std::vector<std::vector<int64_t>>& matrix) {
  const int n = int(matrix.size()), p = power_of_two_below(n);
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  auto talks = [&](int a, int b) { return matrix[std::size_t(a)][std::size_t(b)] > 0; };
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (talks(a, b) && a >= p && b >= p)
        return "rank " + std::to_string(a) + " sent to rank " + std::to_string(b) + ", two extra ranks (both >= p = " +
               std::to_string(p) + ")";
  for (int a = 0; a < p; ++a) {
    int partners = 0;
    for (int b = 0; b < p; ++b) {
      if (talks(a, b) != talks(b, a))
        return "rank " + std::to_string(talks(a, b) ? a : b) + " sent to rank " + std::to_string(talks(a, b) ? b : a) +
               ", which sent nothing back: every exchange among the first p is a pairing";
      partners += talks(a, b);
    }
    if (partners != steps)
      return "rank " + std::to_string(a) + " exchanged with " + std::to_string(partners) + " of the first p = " +
             std::to_string(p) + " ranks, not log2 p = " + std::to_string(steps) + " (one new partner per step)";
  }
  std::vector<int> hosted(std::size_t(p), 0);
  for (int e = p; e < n; ++e) {
    int partners = 0, host = -1;
    for (int b = 0; b < n; ++b)
      if (talks(e, b) || talks(b, e)) ++partners, host = b;
    if (partners != 1)
      return "extra rank " + std::to_string(e) + " talked to " + std::to_string(partners) + " ranks, not one";
    if (++hosted[std::size_t(host)] > 1) return "rank " + std::to_string(host) + " folded in two extra ranks";
  }
  return "";
}

std::vector<SumCheck> check_phases(Context& ctx) {
  const int p = power_of_two_below(ctx.world);
  const int64_t count = 37;  // unequal blocks
  std::vector<int> first(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) first[std::size_t(r)] = r;
  auto block_of = [&](int64_t i) {
    int b = 0;
    while (i >= block_range(count, p, b, b + 1).end) ++b;
    return b;
  };
  std::vector<SumCheck> checks;
  for (const char* name : {"halving_reduce_scatter", "doubling_all_gather"}) {
    const bool scatter = std::string(name) == "halving_reduce_scatter";
    SumCheck check;
    check.name = name;
    double wrong = 0;
    const int m = ctx.rank;
    const std::string hole = unwritten_hole(ctx.comm, [&] {  // the first p ranks take part; the rest wait
      std::vector<float> data(static_cast<std::size_t>(count));
      for (int64_t i = 0; i < count; ++i)  // scatter: rank + 1 everywhere; gather: final in its own block only
        data[std::size_t(i)] = scatter ? float(m + 1) : block_of(i) == m ? float(100 + i) : -1.0f;
      Team team(ctx.comm, first);
      if (scatter) halving_reduce_scatter(team, data.data(), count);
      else doubling_all_gather(team, data.data(), count);
      for (int64_t i = 0; i < count; ++i) {
        if (scatter && block_of(i) == m) wrong += data[std::size_t(i)] != float(p * (p + 1) / 2);
        if (!scatter) wrong += data[std::size_t(i)] != float(100 + i);
      }
    }, m < p);
    check.written = hole.empty();
    check.why = hole;
    check.error = max_over_ranks(ctx.comm, wrong);
    checks.push_back(check);
  }
  return checks;
}

std::string fold_problem() {
  for (int n : {3, 6, 7}) {
    std::vector<std::vector<int64_t>> matrix(std::size_t(n), std::vector<int64_t>(std::size_t(n), 0));
    std::vector<double> off(std::size_t(n), 0);
    LaunchOptions options;
    options.ranks = n;
    options.timeout_s = 10;
    options.private_world = true;  // also from rank 0 of an mpirun job
    std::mutex mutex;
    const auto run = [&] {
      launch(options, [&](Context& ctx) {
        const int64_t count = 16 * n;
        std::vector<float> data(static_cast<std::size_t>(count));
        for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = input(ctx.rank, i);
        auto watched = watch_messages(ctx.comm, [&](const Message& m) {
          std::lock_guard<std::mutex> lock(mutex);
          if (m.dst >= 0) matrix[std::size_t(ctx.rank)][std::size_t(m.dst)] += 4 * m.send_count;
        });
        halving_doubling_all_reduce(Team(*watched), data.data(), count);
        for (int64_t i = 0; i < count; ++i) {
          double expected = 0;
          for (int r = 0; r < n; ++r) expected += input(r, i);
          off[std::size_t(ctx.rank)] += data[std::size_t(i)] != float(expected);
        }
      });
    };
    try {
      const std::string hole = unwritten_hole_here(run);  // a world of its own: no message on this run's
      if (!hole.empty()) return hole;                     // not written: no tick
    } catch (const std::exception& e) {
      return std::to_string(n) + " ranks: " + e.what();
    }
    for (int r = 0; r < n; ++r)
      if (off[std::size_t(r)] > 0)
        return std::to_string(n) + " ranks: rank " + std::to_string(r) + " ended with " +
               std::to_string(int64_t(off[std::size_t(r)])) + " floats that are not the sum";
    std::string problem = halving_doubling_pattern_problem(matrix);
    if (!problem.empty()) return std::to_string(n) + " ranks: " + problem;
  }
  return "";
}

}  // namespace dpt::ch08
