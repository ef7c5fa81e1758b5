// cost_model.h — chapter 08's clock and formulas: a two-tier alpha-beta link
// (one node's ranks share a fast link, nodes a slow one), a replay of the
// messages an algorithm really sent through that link, and each algorithm's
// alpha-beta formula (Thakur, Rabenseifner & Gropp 2005) for the same link.
#pragma once

#include <string>
#include <vector>

#include "dpt/comm/link_model.h"
#include "dpt/comm/watch.h"

namespace dpt::ch08 {

/// n ranks on `nodes` nodes of n / nodes ranks, node-major (rank r on node
/// r / G): a message between two ranks of one node crosses `intra`, any other
/// `inter`.
struct Cluster {
  int ranks = 1;     ///< n
  int nodes = 1;     ///< K
  LinkModel intra;   ///< the link between ranks of one node
  LinkModel inter;   ///< the link between nodes
  /// Ranks per node, G.
  int per_node() const { return ranks / nodes; }
  /// True when a and b share a node.
  bool same_node(int a, int b) const { return a / per_node() == b / per_node(); }
  /// alpha + bytes / beta for a message between world ranks a and b.
  double seconds(int a, int b, double bytes) const;
};

/// Every rank's point-to-point calls in order, as watch_messages saw them:
/// schedule[r] is rank r's list.
using Schedule = std::vector<std::vector<Message>>;

/// The time the last rank finishes when every rank runs its calls of
/// `schedule` in order, each float counting `bytes_per_float` bytes. A message
/// starts when both its sender and its receiver have reached it and takes
/// cluster.seconds(); a rank's call ends when all of its messages have (a
/// sendrecv sends and receives at once). Throws dpt::Error when the calls
/// cannot all complete (a send nobody receives).
double replay(const Schedule& schedule, const Cluster& cluster, double bytes_per_float);

/// The algorithms of ch08.h, by name, in the order the tables print them.
const std::vector<std::string>& algorithm_names();
/// One letter for the crossover table: R ring, D doubling, H halving-doubling,
/// T tree, 2 two-level.
char algorithm_letter(const std::string& name);
/// The formula as printed ("2(n-1)a + 2(n-1)/n S b").
std::string formula_text(const std::string& name);
/// Seconds the formula predicts for an all-reduce of `bytes` on `cluster`,
/// each step charged the alpha and beta of the slowest link any of its
/// messages crosses (on one node, exactly Thakur et al.'s formulas).
double formula_seconds(const std::string& name, const Cluster& cluster, double bytes);

}  // namespace dpt::ch08
