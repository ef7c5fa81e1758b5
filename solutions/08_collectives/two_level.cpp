// solutions/08_collectives/two_level.cpp — the two-level (hierarchical)
// all-reduce: reduce-scatter inside each node, all-reduce of each rank's
// block across nodes among the ranks of the same local index, all-gather
// inside each node (spec: ch08.h).
//
// Only S/G bytes per rank cross the slow links, and all G ranks of a node
// cross at once, each on its own link:
//   T = 2(G−1)·(α_in + S/G·β_in) + T_halving_doubling(K nodes, S/G, α_out, β_out)
#include "ch08.h"
#include "dpt/check.h"

namespace dpt::ch08 {

void two_level_all_reduce(Communicator& comm, float* data, int64_t count, int nodes) {
  const int n = comm.size();
  DPT_CHECK(nodes >= 1 && n % nodes == 0, "two_level_all_reduce: " << n << " ranks do not split into " << nodes
                                                                    << " nodes of equal size");
  const int g = n / nodes, node = comm.rank() / g, local = comm.rank() % g;
  std::vector<int> same_node, same_local;
  for (int l = 0; l < g; ++l) same_node.push_back(node * g + l);
  for (int k = 0; k < nodes; ++k) same_local.push_back(k * g + local);
  Team inside(comm, same_node), across(comm, same_local);
  pairwise_reduce_scatter(inside, data, count);  // our block `local` now holds the node's sum
  Range mine = block_range(count, g, local, local + 1);
  halving_doubling_all_reduce(across, data + mine.begin, mine.size());  // … and now every node's
  pairwise_all_gather(inside, data, count);
}

}  // namespace dpt::ch08
