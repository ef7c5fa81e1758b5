// clock_sections.cpp — chapter 08's sections 3 and 4 (clock_sections.h).
#include "clock_sections.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "sweep.h"

namespace dpt::ch08 {

// ----------------------------------------------------------------------------
// 3. formula vs clock at this world's size

Cluster cluster(const Ch08Flags& f, int n) {
  return {n, f.nodes, link_preset(f.link_intra), link_preset(f.link_inter)};
}

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
    if (n == 1) continue;  // one rank sends nothing: clock and formula are both 0
    v.at_most(sum.name + ": clock = formula on one tier, <= it on two; worst relative excess", off, 1e-9,
              "same steps counted; on two tiers a step whose pairs mix links lets the fast pairs run ahead");
  }
  if (say.enabled()) table.print(std::cout);
  if (n == 1) v.cannot_fail("each algorithm: clock = formula on this world", on_one_rank(8));
  say.say("a = alpha (latency per message), b = beta (seconds per byte), S bytes, p = largest power of two <= n, "
          "G ranks per node, K nodes, lg = log2; H(K, X) is halving-doubling of X among K.");
}

// ----------------------------------------------------------------------------
// 4. the crossover table, the tuner, the plot

std::vector<std::string> written(const std::vector<SumCheck>& sums) {
  std::vector<std::string> names;
  for (const SumCheck& sum : sums)
    if (sum.written) names.push_back(sum.name);
  return names;
}

void crossover_section(const Narrator& say, const Ch08Flags& f, const std::vector<SumCheck>& sums, Verdicts& v) {
  std::vector<std::string> names = written(sums);
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

}  // namespace dpt::ch08
