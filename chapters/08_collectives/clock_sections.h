// clock_sections.h — chapter 08's sections 3 and 4 (rank 0, on threads
// worlds it records): each algorithm's formula beside the replayed clock, and
// the crossover table, the tuner and the plot. The lecture is main.cpp.
#pragma once

#include <string>
#include <vector>

#include "checks.h"
#include "cost_model.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

namespace dpt::ch08 {

/// Chapter 08's own flags.
struct Ch08Flags {
  int nodes = 0;                    ///< --nodes K: ranks grouped node-major (0: not given, the lecture picks)
  std::string link_intra = "nvlink";  ///< --link-intra: the preset inside a node
  std::string link_inter = "ethernet";  ///< --link-inter: the preset between nodes
  int max_ranks = 16;               ///< --max-ranks: the crossover sweep's largest world
  std::string plot;                 ///< --plot FILE.svg ("" none)
};

/// The two-tier links of n ranks in --nodes nodes.
Cluster cluster(const Ch08Flags& f, int n);
/// The algorithms whose holes are written, in check order.
std::vector<std::string> written(const std::vector<SumCheck>& sums);
/// Section 3: formula beside the clock at this world's size, one verdict per algorithm.
void clock_section(const Narrator& say, const Ch08Flags& f, int n, const std::vector<SumCheck>& sums, Verdicts& v);
/// Section 4: the crossover table up to --max-ranks, the tuner's verdict, the --plot.
void crossover_section(const Narrator& say, const Ch08Flags& f, const std::vector<SumCheck>& sums, Verdicts& v);

}  // namespace dpt::ch08
