// ch08_collectives — which all-reduce, when.
//
// What it teaches: five ways to all-reduce, all built from send / recv /
// sendrecv — chapter 04's ring, recursive doubling, Rabenseifner's halving
// and doubling, a binomial tree, and a two-level all-reduce for ranks grouped
// in nodes — and why libraries keep several. Each algorithm trades messages
// (alpha, the latency each one pays) against bytes (beta, the time per byte):
// the ring sends the fewest bytes in the most messages, recursive doubling
// the fewest messages with the most bytes. On a cluster the links inside a
// node are ten to a hundred times faster than those between nodes, and the
// two-level algorithm sends only 1/G of the bytes across.
//
// The chapter checks every algorithm's sums and traffic on this world, then
// replays the messages each one really sent through a two-tier alpha-beta
// clock (--link-intra inside a node, --link-inter between nodes), prints the
// Thakur–Rabenseifner–Gropp formula beside it, sweeps sizes 4 B … 256 MiB and
// worlds 2 … 16 into a crossover table, and lets a tuner pick from the
// formulas, as NCCL's tuner does.
//
// What it leaves out: pipelining (NCCL's trees and rings cut S into pieces),
// contention inside a switch, and wall-clock timing (bench_allreduce).
//
// Run it:
//     build/reference/bin/ch08_collectives --ranks 8 --nodes 2
//     build/reference/bin/ch08_collectives --ranks 8 --nodes 2 --link-inter infiniband --plot ch08.svg
//     mpirun --oversubscribe -np 8 build/reference/bin/ch08_collectives --comm mpi --nodes 2
//
// Your holes (chapters/08_collectives/ch08.h): halving_reduce_scatter,
// doubling_all_gather, halving_doubling_all_reduce, two_level_all_reduce.
// Exit code: 0 all verdicts ✔, 3 one ✘, 1 error.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "ch08.h"
#include "checks.h"
#include "cost_model.h"
#include "dpt/device.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "sweep.h"

using namespace dpt;
using namespace dpt::ch08;

struct Ch08Flags {
  int nodes = 1;
  std::string link_intra = "nvlink", link_inter = "ethernet";
  int max_ranks = 16;
  std::string plot;
  bool quiet = false;  // verdicts only
};

void sums_verdicts(const Narrator& say, const std::vector<SumCheck>& sums, Verdicts& v);
void traffic_section(Context& ctx, const Narrator& say, const Ch08Flags& f, const std::vector<SumCheck>& sums,
                     Verdicts& v);
void clock_section(const Narrator& say, const Ch08Flags& f, int n, const std::vector<SumCheck>& sums, Verdicts& v);
void crossover_section(const Narrator& say, const Ch08Flags& f, const std::vector<SumCheck>& sums, Verdicts& v);

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates and returns the exit code

int lecture(Context& ctx, const Ch08Flags& f) {
  Narrator say(ctx.is_root() && !f.quiet);
  DPT_CHECK(ctx.world % f.nodes == 0, "--nodes " << f.nodes << " does not divide " << ctx.world
                                                 << " ranks into nodes of equal size: pick a divisor of --ranks");
  Verdicts verdicts;
  const int g = ctx.world / f.nodes;
  // ---- 1. Does each one sum?
  say.section("1. Does each one sum? " + std::to_string(ctx.world) + " ranks as " + std::to_string(f.nodes) +
              " node(s) x " + std::to_string(g) + ", integer inputs, 1, 7 and 1001 floats");
  std::vector<SumCheck> sums = check_sums(ctx, f.nodes);
  sums_verdicts(say, sums, verdicts);

  // ---- 2. Who talks to whom, and how much crosses the slow link?
  say.section("2. Who talks to whom? The traffic log of one all-reduce of " + format_bytes(4096.0 * ctx.world));
  traffic_section(ctx, say, f, sums, verdicts);

  // ---- 3 and 4: the clock replays messages recorded on threads worlds of 2 … 16 ranks
  ctx.comm.barrier();
  if (ctx.is_root()) {
    if (ctx.comm.backend() != "threads") {
      say.say("\n(sections 3 and 4 record each algorithm on threads worlds of 2 … 16 ranks, which cannot start "
              "inside an mpirun job: run without mpirun to see them)");
    } else {
      say.section("3. How long? Each algorithm's formula beside the clock that replays its messages");
      clock_section(say, f, ctx.world, sums, verdicts);
      say.section("4. Which all-reduce, when? The fastest by the clock, per size and world");
      crossover_section(say, f, sums, verdicts);
    }
  }
  ctx.comm.barrier();  // the other ranks wait here while rank 0 sweeps
  if (!ctx.is_root()) return 0;

  // ---- 5. Verdicts
  verdicts.print(std::cout);
  return verdicts.exit_code();
}

// ----------------------------------------------------------------------------
// 1. sums: integers below 2^24 add exactly in any order, so any error is a
// missed or doubled contribution

void sums_verdicts(const Narrator& say, const std::vector<SumCheck>& sums, Verdicts& v) {
  for (const SumCheck& s : sums) {
    say.say("  " + s.name + ": " + (!s.written ? "not written yet" : s.error == 0 ? "the exact sum on every rank"
                                                                               : "off by " + fmt(s.error, 3)));
    if (!s.written) {
      v.holds(s.name + ": every rank ends with the serial sum", false, s.why);
      continue;
    }
    v.at_most(s.name + ": every rank ends with the serial sum, max relative error", s.error, 0,
              "integer inputs: any error is a contribution missed or counted twice");
  }
}

// ----------------------------------------------------------------------------
// 2. traffic: bytes in all against each algorithm's count on paper; the
// halving/doubling partners; what crosses between nodes

void traffic_section(Context& ctx, const Narrator& say, const Ch08Flags& f, const std::vector<SumCheck>& sums,
                     Verdicts& v) {
  const int n = ctx.world, g = n / f.nodes;
  const int64_t count = 1024 * int64_t(n);  // every block of every algorithm divides evenly
  const double s = 4.0 * double(count);
  Table table("traffic of one all-reduce of S = " + format_bytes(s), {"algorithm", "bytes sent (all ranks)",
                                                                      "on paper", "busiest rank across nodes"});
  double ring_across = 2.0 * (n - 1) / n * s;  // a flat ring's busiest crossing: every step sends S/n across
  for (const SumCheck& sum : sums) {
    if (!sum.written) continue;
    TrafficSeen seen = traffic_of(ctx, sum.name, f.nodes, count);
    double paper = theory_total_bytes(sum.name, n, f.nodes, s);
    table.add_row({sum.name, format_bytes(double(seen.total)), format_bytes(paper),
                   f.nodes > 1 ? format_bytes(double(seen.busiest_across)) : "-"});
    if (!ctx.is_root()) continue;
    v.near(sum.name + ": bytes sent by all ranks = the count on paper", double(seen.total), paper, 1e-9,
           "every block divides evenly: exact");
    if (sum.name == "halving-doubling") {
      std::string problem = halving_doubling_pattern_problem(seen.matrix);
      v.holds("halving-doubling: partners are r XOR 2^k; each extra rank folds into one of the first p", problem.empty(),
              problem);
    }
    if (sum.name == "two-level" && f.nodes > 1) {
      v.holds("two-level: across nodes only ranks of the same local index talk", seen.stray_across.empty(),
              seen.stray_across.empty() ? "" : "saw " + seen.stray_across);
      const int k = f.nodes, pk = power_of_two_below(k);
      double expected = (2.0 * (pk - 1) / pk + (k > pk ? 1.0 : 0.0)) * s / g;  // halving-doubling of S/G among K
      v.near("two-level: busiest rank's inter-node bytes = halving-doubling of S/G among K nodes",
             double(seen.busiest_across), expected, 1e-9, "flat ring: " + format_bytes(ring_across));
      if (k == pk)
        v.at_most("two-level: busiest inter-node bytes / flat ring's, at most 1/G = " + fmt(1.0 / g, 3),
                  double(seen.busiest_across) / ring_across, 1.0 / g, "(K-1)/K * n/(n-1) <= 1 times 1/G");
    }
  }
  if (say.enabled()) table.print(std::cout);
  say.say("A flat ring's busiest rank sends " + format_bytes(ring_across) + " across nodes per all-reduce.");
}

// ----------------------------------------------------------------------------
// 3. formula vs clock at this world's size

namespace {
Cluster cluster(const Ch08Flags& f, int n) {
  return {n, f.nodes, link_preset(f.link_intra), link_preset(f.link_inter)};
}
}  // namespace

void clock_section(const Narrator& say, const Ch08Flags& f, int n, const std::vector<SumCheck>& sums, Verdicts& v) {
  Cluster c = cluster(f, n);
  say.say("inside a node (" + f.link_intra + "): " + c.intra.describe() + "; between nodes (" + f.link_inter +
          "): " + c.inter.describe());
  Table table("all-reduce on " + std::to_string(n) + " ranks, " + std::to_string(f.nodes) +
                  " node(s): clock / formula, microseconds",
              {"algorithm", "formula (a, b of each step's slowest link)", "4 B", "64 KiB", "1 MiB", "64 MiB"});
  for (const SumCheck& sum : sums) {
    if (!sum.written) continue;
    Schedule schedule = record_schedule(sum.name, n, f.nodes);
    std::vector<std::string> row = {sum.name, formula_text(sum.name)};
    Cluster one_tier = c;
    one_tier.inter = c.intra;  // every link the fast one: Thakur et al.'s setting
    double off = 0;
    for (double bytes : sweep_sizes()) {
      double clock = clock_seconds(schedule, c, bytes), formula = formula_seconds(sum.name, c, bytes);
      double clock_1 = clock_seconds(schedule, one_tier, bytes), formula_1 = formula_seconds(sum.name, one_tier, bytes);
      off = std::max({off, (clock - formula) / std::max(formula, 1e-30),  // two tiers: an upper bound
                      std::fabs(clock_1 - formula_1) / std::max(formula_1, 1e-30)});  // one tier: exact
      if (bytes == 4 || bytes == 65536 || bytes == 1048576 || bytes == 67108864)
        row.push_back(fixed(clock * 1e6, 1) + " / " + fixed(formula * 1e6, 1));
    }
    table.add_row(row);
    v.at_most(sum.name + ": clock = formula on one tier, <= it on two; worst relative excess", off, 1e-9,
              "same steps counted; on two tiers a step whose pairs mix links lets the fast pairs run ahead");
  }
  if (say.enabled()) table.print(std::cout);
  say.say("a = alpha (latency per message), b = beta (seconds per byte), S bytes, p = largest power of two <= n, "
          "G ranks per node, K nodes, lg = log2; H(K, X) is halving-doubling of X among K.");
}

// ----------------------------------------------------------------------------
// 4. the crossover table, the tuner, the plot

void crossover_section(const Narrator& say, const Ch08Flags& f, const std::vector<SumCheck>& sums, Verdicts& v) {
  std::vector<std::string> names;
  for (const SumCheck& sum : sums)
    if (sum.written) names.push_back(sum.name);
  Cluster c = cluster(f, f.max_ranks);
  Crossover x = sweep_crossover(names, c, f.max_ranks);  // sweep.cpp: record, replay, pick
  std::vector<std::string> headers = {"size"};
  for (int n : x.worlds) headers.push_back("n=" + std::to_string(n));
  Table table("fastest by the clock (R ring, D doubling, H halving-doubling, T tree, 2 two-level; lower case: "
              "the tuner picked another)", headers);
  for (std::size_t i = 0; i < x.sizes.size(); ++i) {
    std::vector<std::string> row = {format_bytes(x.sizes[i])};
    row.insert(row.end(), x.cells[i].begin(), x.cells[i].end());
    table.add_row(row);
  }
  if (say.enabled()) table.print(std::cout);
  say.say("The tuner picks, per cell, the algorithm whose formula is smallest (as NCCL's tuner does from its "
          "model); it picked the clock's fastest in " + std::to_string(x.hits) + " of " + std::to_string(x.total) +
          " cells, one within 1% of it in " + std::to_string(x.close) + ".");
  v.at_least("tuner: its pick is within 1% of the clock's fastest, fraction of cells", double(x.close) / x.total, 0.9,
             "the formulas are exact on one tier and upper bounds where a step mixes tiers");
  if (f.plot.empty()) {
    say.say("add --plot FILE.svg for a plot of time vs size per algorithm");
    return;
  }
  std::string where = std::to_string(x.worlds.back()) + " ranks on " + std::to_string(f.nodes) + " node(s)";
  write_plot(f.plot, "all-reduce time vs size, " + where + " (replayed clock)", names, x.sizes, x.plot_seconds);
  say.say("plot: " + f.plot + " (time vs size per algorithm, " + where + ")");
}

// ----------------------------------------------------------------------------
// flags, then the lecture on every rank

int main(int argc, char** argv) {
  CLI::App app{"ch08_collectives — which all-reduce, when", "ch08_collectives"};
  LaunchOptions launch_options;
  Ch08Flags flags;
  add_launch_flags(app, launch_options);
  app.add_option("--nodes", flags.nodes, "Nodes the ranks are grouped in (node-major: rank r on node r / (n/K))")
      ->check(integer_in(1, kMaxRanks))->capture_default_str();
  app.add_option("--link-intra", flags.link_intra, "Link preset inside a node (the clock's fast tier)")
      ->check(CLI::IsMember(link_preset_names()))->capture_default_str();
  app.add_option("--link-inter", flags.link_inter, "Link preset between nodes (the clock's slow tier)")
      ->check(CLI::IsMember(link_preset_names()))->capture_default_str();
  app.add_option("--max-ranks", flags.max_ranks, "Largest world in the crossover sweep")
      ->check(integer_in(2, 64))->capture_default_str();
  app.add_flag("--quiet", flags.quiet, "Print the verdicts only");
  app.add_option("--plot", flags.plot, "Write an SVG plot of time vs size per algorithm here")->check(output_path());
  parse_flags(app, argc, argv);
  return run_lecture("ch08_collectives", launch_options, [&](Context& ctx) { return lecture(ctx, flags); });
}
