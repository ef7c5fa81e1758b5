// test_ch08_all_reduce.cpp — chapter 08's all-reduce holes:
// halving_doubling_all_reduce (serial sums for any n, extra ranks folded in and
// out, each counted once, talking to one of the first p) and
// two_level_all_reduce (serial sums on K nodes x G ranks; across nodes only
// same-index ranks talk, 1/G of the bytes). Each checks the parts it is built
// on first (support/ch08_run.h), so a broken part is named, not the whole.
#include "support/catch.h"
#include <cstdint>
#include <utility>
#include <vector>

#include "ch08.h"
#include "support/ch08_run.h"
#include "support/contributions.h"

using namespace dpt;
using namespace dpt::ch08;
using dpt_test::input;
using dpt_test::Run;
using dpt_test::run;
using dpt_test::require_serial_sums;
using dpt_test::serial_sum;

namespace {
// Rank r contributes 8^r at every element (support/contributions.h): a sum
// read in base 8 says how often each rank's contribution reached it.
using dpt_test::contribution_everywhere;
using dpt_test::all_once;
using dpt_test::contributions;
}  // namespace

// ----------------------------------------------------------------------------
// halving_doubling_all_reduce: sums for any n, the fold

TEST_CASE("halving_doubling_all_reduce: every rank gets the serial sum, n = 1 … 9 and 16, any count",
          "[ch08][needs:halving_reduce_scatter][needs:doubling_all_gather]") {
  dpt_test::require_halving_doubling_phases();  // its parts first: a fault there is named there
  for (int world : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16})
    for (int64_t count : {0, 1, 2, 3, 7, 1001}) {  // shorter than, and not divisible by, n
      Run r = run(world, count, input, [](Communicator& c, std::vector<float>& d) {
        halving_doubling_all_reduce(Team(c), d.data(), int64_t(d.size()));
      });
      require_serial_sums(r, world, count, "halving-doubling");
    }
}

TEST_CASE("halving_doubling_all_reduce: extra ranks fold in before and out after, each counted once",
          "[ch08][needs:halving_reduce_scatter][needs:doubling_all_gather]") {
  dpt_test::require_halving_doubling_phases();  // its parts first: a fault there is named there
  for (int world : {3, 5, 6, 7}) {
    const int p = power_of_two_below(world);
    Run r = run(world, 24, contribution_everywhere, [](Communicator& c, std::vector<float>& d) {
      halving_doubling_all_reduce(Team(c), d.data(), int64_t(d.size()));
    });
    for (int rank = 0; rank < world; ++rank)
      for (int64_t i = 0; i < 24; ++i)
        if (r.data[std::size_t(rank)][std::size_t(i)] != all_once(world))
          FAIL(world << " ranks (p = " << p << ", extra ranks " << p << " … " << world - 1 << "): rank " << rank
                     << (rank >= p ? " (an extra)" : "") << "'s element " << i << " holds "
                     << contributions(r.data[std::size_t(rank)][std::size_t(i)], world)
                     << ". Each extra rank's vector must be folded into one of the first p before the two phases, "
                        "and every extra must get the result back after them.");
  }
}

TEST_CASE("halving_doubling_all_reduce: an extra rank talks to one of the first p, once each way",
          "[ch08][needs:halving_reduce_scatter][needs:doubling_all_gather]") {
  dpt_test::require_halving_doubling_phases();
  for (int world : {3, 5, 6, 7, 9}) {
    const int p = power_of_two_below(world);
    const int64_t count = 16 * p;
    Run r = run(world, count, input, [](Communicator& c, std::vector<float>& d) {
      halving_doubling_all_reduce(Team(c), d.data(), int64_t(d.size()));
    });
    std::vector<int> hosted(std::size_t(p), 0);
    for (int e = p; e < world; ++e) {
      const auto& seen = r.messages[std::size_t(e)];
      std::string calls;
      for (const Message& m : seen)
        calls += std::string(" ") + m.call + "(to " + std::to_string(m.dst) + ", from " + std::to_string(m.src) + ")";
      INFO(world << " ranks: extra rank " << e << " made:" << calls);
      INFO("an extra rank sends its whole vector to one rank of the first p = " << p
                                                                               << " and receives the result from it");
      REQUIRE(seen.size() == 2);
      int host = seen[0].dst >= 0 ? seen[0].dst : seen[0].src;
      REQUIRE(host >= 0);
      REQUIRE(host < p);
      CHECK((seen[0].dst == host && seen[0].send_count == count));
      CHECK((seen[1].src == host && seen[1].recv_count == count));
      INFO("rank " << host << " folds in more than one extra rank: each of the first p hosts at most one");
      CHECK(++hosted[std::size_t(host)] == 1);
    }
    for (int a = 0; a < p; ++a)
      for (int b = 0; b < p; ++b)
        if (r.traffic[std::size_t(a)][std::size_t(b)] > 0) {
          INFO(world << " ranks: rank " << a << " sent to rank " << b << ", who sent nothing back; among the first "
                     "p = " << p << " ranks every exchange is a pairing (a sendrecv both ways)");
          CHECK(r.traffic[std::size_t(b)][std::size_t(a)] > 0);
        }
  }
}

// ----------------------------------------------------------------------------
// two_level_all_reduce

namespace {
const std::vector<std::pair<int, int>> kLayouts = {{1, 1}, {2, 1}, {2, 2}, {4, 2}, {6, 2}, {6, 3}, {8, 2},
                                                   {8, 4}, {9, 3}, {12, 3}, {16, 4}};  // (ranks, nodes)
}

TEST_CASE("two_level_all_reduce: every rank gets the serial sum on K nodes x G ranks",
          "[ch08][needs:halving_doubling_all_reduce]") {
  dpt_test::require_halving_doubling(4);  // the team algorithms it is built on, on K = 1 … 4 first
  for (auto [world, nodes] : kLayouts)
    for (int64_t count : {1, 7, 1001}) {
      const int g = world / nodes;
      Run r = run(world, count, input, [nodes = nodes](Communicator& c, std::vector<float>& d) {
        two_level_all_reduce(c, d.data(), int64_t(d.size()), nodes);
      });
      for (int rank = 0; rank < world; ++rank)
        for (int64_t i = 0; i < count; ++i) {
          float got = r.data[std::size_t(rank)][std::size_t(i)];
          if (got == float(serial_sum(world, i))) continue;
          double node_sum = 0;
          for (int l = 0; l < g; ++l) node_sum += input(rank / g * g + l, i);
          FAIL(world << " ranks on " << nodes << " nodes, " << count << " floats: rank " << rank << "'s element "
                     << i << " is " << got << ", the sum over all ranks is " << serial_sum(world, i)
                     << (got == float(node_sum) ? " — it holds its own node's sum only: the step across nodes is "
                                                  "missing or summed nothing"
                                                : ": every rank must end with the sum over every node"));
        }
    }
}

TEST_CASE("two_level_all_reduce: across nodes only same-index ranks talk, 1/G of the bytes",
          "[ch08][needs:halving_doubling_all_reduce]") {
  dpt_test::require_halving_doubling(4);  // the team algorithms it is built on, on K = 1 … 4 first
  for (auto [world, nodes] : kLayouts) {
    if (nodes == 1) continue;
    const int g = world / nodes, pk = power_of_two_below(nodes);
    const int64_t count = 16 * int64_t(world);  // every block divides evenly
    const double s = 4.0 * double(count);
    Run r = run(world, count, input, [nodes = nodes](Communicator& c, std::vector<float>& d) {
      two_level_all_reduce(c, d.data(), int64_t(d.size()), nodes);
    });
    // One halving-doubling of X among K ranks sends at most 2(p-1)/p·X, plus X
    // for a rank that folds an extra back out; the two-level's X is S/G.
    const double across_bound = (2.0 * (pk - 1) / pk + (nodes > pk ? 1.0 : 0.0)) * s / g;
    int64_t busiest = 0;
    for (int a = 0; a < world; ++a) {
      int64_t across = 0, inside = 0;
      for (int b = 0; b < world; ++b) {
        int64_t bytes = r.traffic[std::size_t(a)][std::size_t(b)];
        if (a / g == b / g) {
          inside += bytes;
          continue;
        }
        across += bytes;
        if (bytes > 0 && a % g != b % g)
          FAIL(world << " ranks on " << nodes << " nodes: rank " << a << " (node " << a / g << ", local " << a % g
                     << ") sent " << bytes << " bytes to rank " << b << " (node " << b / g << ", local " << b % g
                     << "): across nodes a rank talks only to ranks of its own local index");
      }
      busiest = std::max(busiest, across);
      INFO(world << " ranks on " << nodes << " nodes: rank " << a << " sent " << inside << " bytes inside its node; "
                 "a bandwidth-optimal all-reduce among its node's G ranks sends 2(G-1)/G·S = " << 2.0 * (g - 1) / g * s);
      CHECK(double(inside) == 2.0 * (g - 1) / g * s);
    }
    INFO(world << " ranks on " << nodes << " nodes: the busiest rank sent " << busiest << " bytes across nodes; "
         "the contract allows at most " << across_bound << " (1/G of what a halving-doubling of the whole "
         "vector among the K nodes sends), and a flat ring's "
         "busiest rank " << 2.0 * (world - 1) / world * s);
    CHECK(double(busiest) <= across_bound);
    CHECK(busiest > 0);
    if (nodes == pk) CHECK(double(busiest) <= 2.0 * (world - 1) / world * s / g);  // 1/G of the flat ring's
  }
}
