// checks.cpp — exact sums and traffic patterns, computed from the run.
//
// The sums' oracle is a serial sum of small integers (exact in any order);
// the traffic's oracle is the threads/MPI traffic log, not the algorithms'
// own code.
#include "checks.h"

#include <cmath>

#include "ch08.h"
#include "cost_model.h"
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
      try {
        run_algorithm(name, ctx.comm, data.data(), count, nodes);
      } catch (const NotImplemented& e) {  // every rank throws before any message
        check.written = false;
        check.why = e.what();
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
  std::vector<int> hosted(std::size_t(p), 0);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (matrix[std::size_t(a)][std::size_t(b)] == 0) continue;
      std::string pair = "rank " + std::to_string(a) + " sent to rank " + std::to_string(b);
      if (a < p && b < p) {
        int x = a ^ b;
        if ((x & (x - 1)) != 0) return pair + ", which is not r XOR 2^k of it";
      } else if (a >= p && b >= p) {
        return pair + ", two extra ranks (both >= p = " + std::to_string(p) + ")";
      }
    }
  for (int e = p; e < n; ++e) {
    int partners = 0, host = -1;
    for (int b = 0; b < n; ++b)
      if (matrix[std::size_t(e)][std::size_t(b)] > 0 || matrix[std::size_t(b)][std::size_t(e)] > 0) ++partners, host = b;
    if (partners != 1)
      return "extra rank " + std::to_string(e) + " talked to " + std::to_string(partners) + " ranks, not one";
    if (++hosted[std::size_t(host)] > 1) return "rank " + std::to_string(host) + " folded in two extra ranks";
  }
  return "";
}

}  // namespace dpt::ch08
