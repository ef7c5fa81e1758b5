// test_ch08.cpp — chapter 08: the halving/doubling all-reduce and the
// two-level all-reduce (the holes), the provided all-reduces, and the replay
// clock. Oracles share no code with the algorithms: serial sums of small
// integers (exact in any order), contributions 8^r read back in base 8 (which
// ranks reached an element, and how often), the messages a watching
// communicator saw (partners, sizes), and the traffic log (bytes per pair).
#include "support/catch.h"
#include <cmath>
#include <mutex>

#include "ch08.h"
#include "cost_model.h"
#include "dpt/comm/watch.h"
#include "support/contributions.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "sweep.h"

using namespace dpt;
using namespace dpt::ch08;

namespace {
// ----------------------------------------------------------------------------
// running an algorithm on a threads world and reading what it did

struct Run {
  std::vector<std::vector<float>> data;        // each rank's vector afterwards
  std::vector<std::vector<Message>> messages;  // each rank's calls, as watched
  std::vector<std::vector<int64_t>> traffic;   // bytes [src][dst]
};

using Fill = std::function<float(int rank, int64_t i)>;
using Body = std::function<void(Communicator&, std::vector<float>&)>;

Run run(int world, int64_t count, const Fill& fill, const Body& body) {
  Run out;
  out.data.resize(std::size_t(world));
  out.messages.resize(std::size_t(world));
  std::mutex mutex;
  try {
  dpt_test::run_ranks(world, [&](Context& ctx) {
    std::vector<float> data(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = fill(ctx.rank, i);
    auto watched = watch_messages(ctx.comm, [&](const Message& m) { out.messages[std::size_t(ctx.rank)].push_back(m); });
    body(*watched, data);
    ctx.comm.barrier();  // every send is logged before rank 0 reads the table
    std::lock_guard<std::mutex> lock(mutex);
    out.data[std::size_t(ctx.rank)] = data;
    if (ctx.is_root()) out.traffic = ctx.comm.traffic().matrix();
  }, 3.0);
  } catch (const Timeout& e) {
    FAIL(world << " ranks deadlocked: every rank waited for a peer that was waiting too. Partners must choose each "
         "other (when r exchanges with q at a step, q exchanges with r at that step), and a rank must not send "
         "first and receive after where its peer does the same (communicator.h, rendezvous). The timeout said: "
         << e.what());
  }
  return out;
}

// Rank r's element i: distinct, integer, and any sum over 16 ranks is exact.
float input(int rank, int64_t i) { return float((rank + 1) * 1000 + i % 997); }
double serial_sum(int world, int64_t i) {
  double s = 0;
  for (int r = 0; r < world; ++r) s += input(r, i);
  return s;
}

// Rank r contributes 8^r (support/contributions.h): a sum read in base 8
// says how often each rank's contribution reached it.
float contribution(int rank, int64_t) { return dpt_test::contribution(rank); }
using dpt_test::all_once;
using dpt_test::contributions;

bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }
int log2_of(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

// Checks every rank holds the serial sum; says in words what is off.
void require_serial_sums(const Run& r, int world, int64_t count, const std::string& what) {
  for (int rank = 0; rank < world; ++rank)
    for (int64_t i = 0; i < count; ++i)
      if (r.data[std::size_t(rank)][std::size_t(i)] != float(serial_sum(world, i)))
        FAIL(what << ", " << world << " ranks, " << count << " floats: rank " << rank << "'s element " << i << " is "
                  << r.data[std::size_t(rank)][std::size_t(i)] << ", the sum over ranks is " << serial_sum(world, i)
                  << ": every rank must end with the sum of every rank's vector, each counted once");
}
}  // namespace

// ----------------------------------------------------------------------------
// halving_reduce_scatter

TEST_CASE("halving_reduce_scatter: member r ends with block r's sum, every contribution once", "[ch08]") {
  for (int p : {1, 2, 4, 8}) {
    for (int64_t count : {int64_t(p), int64_t(10), int64_t(37)}) {  // one float per block; unequal blocks
      Run r = run(p, count, contribution, [](Communicator& c, std::vector<float>& d) {
        halving_reduce_scatter(Team(c), d.data(), int64_t(d.size()));
      });
      for (int m = 0; m < p; ++m) {
        Range block = block_range(count, p, m, m + 1);
        for (int64_t i = block.begin; i < block.end; ++i) {
          if (r.data[std::size_t(m)][std::size_t(i)] == all_once(p)) continue;
          std::string instead;  // a block this member did finish, if any
          for (int b = 0; b < p && instead.empty(); ++b) {
            Range other = block_range(count, p, b, b + 1);
            if (other.size() > 0 && r.data[std::size_t(m)][std::size_t(other.begin)] == all_once(p))
              instead = " (it finished block " + std::to_string(b) + " instead)";
          }
          FAIL(p << " members, " << count << " floats: after the reduce-scatter member " << m << "'s block " << m
                 << " holds " << contributions(r.data[std::size_t(m)][std::size_t(i)], p) << instead
                 << ". Member r must end holding block r summed over every member, each once: which partner comes "
                    "first, and which half a member keeps, decide which block it ends with.");
        }
      }
    }
  }
}

TEST_CASE("halving_reduce_scatter: log2 p steps, partner r XOR 2^k, half as much each step", "[ch08]") {
  for (int p : {2, 4, 8, 16}) {
    const int64_t count = 16 * p;  // every half divides evenly
    Run r = run(p, count, input, [](Communicator& c, std::vector<float>& d) {
      halving_reduce_scatter(Team(c), d.data(), int64_t(d.size()));
    });
    for (int m = 0; m < p; ++m) {
      const auto& seen = r.messages[std::size_t(m)];
      INFO(p << " members: member " << m << " made " << seen.size() << " calls");
      INFO("halving takes log2 p = " << log2_of(p) << " steps of one sendrecv each");
      REQUIRE(int(seen.size()) == log2_of(p));
      int bits_used = 0;
      for (std::size_t k = 0; k < seen.size(); ++k) {
        const Message& msg = seen[k];
        INFO(p << " members: member " << m << " at step " << k << ": " << msg.call << " to " << msg.dst << " ("
               << msg.send_count << " floats), from " << msg.src << " (" << msg.recv_count << " floats)");
        INFO("each step is one sendrecv with one partner, who differs from r in exactly one bit (r XOR 2^k), a "
             "different bit each step");
        REQUIRE(msg.dst >= 0);
        REQUIRE(msg.dst == msg.src);
        int x = m ^ msg.dst;
        REQUIRE(power_of_two(x));
        REQUIRE((bits_used & x) == 0);
        bits_used |= x;
        INFO("a member gives up half of what it holds at each step: count/2, then count/4, … (" << count << " floats)");
        CHECK(msg.send_count == (count >> (k + 1)));
        CHECK(msg.recv_count == (count >> (k + 1)));
      }
    }
  }
}

// ----------------------------------------------------------------------------
// doubling_all_gather

TEST_CASE("doubling_all_gather: every member ends with every member's final block, copied", "[ch08]") {
  for (int p : {1, 2, 4, 8}) {
    for (int64_t count : {int64_t(p), int64_t(37)}) {
      // Member r's block r holds 100·(r+1) + i (final); elsewhere 10000·(rank+1) + i (stale).
      auto owner = [&](int64_t i) {
        for (int b = 0; b < p; ++b)
          if (i < block_range(count, p, b, b + 1).end) return b;
        return p - 1;
      };
      Fill fill = [&](int rank, int64_t i) {
        return owner(i) == rank ? float(100 * (rank + 1) + i) : float(10000 * (rank + 1) + i);
      };
      Run r = run(p, count, fill, [](Communicator& c, std::vector<float>& d) {
        doubling_all_gather(Team(c), d.data(), int64_t(d.size()));
      });
      for (int m = 0; m < p; ++m)
        for (int64_t i = 0; i < count; ++i) {
          float got = r.data[std::size_t(m)][std::size_t(i)], want = float(100 * (owner(i) + 1) + i),
                stale = float(10000 * (m + 1) + i);
          if (got == want) continue;
          FAIL(p << " members, " << count << " floats: after the all-gather member " << m << "'s element " << i
                 << " (block " << owner(i) << ") is " << got << ", its owner's final value is " << want
                 << (got == stale ? " (it never arrived: each step a member sends all it holds final)"
                     : got == want + stale ? " (it was added: the all-gather copies, it does not add)"
                                           : " (another block landed there)"));
        }
    }
  }
}

TEST_CASE("doubling_all_gather: log2 p steps, partner r XOR 2^k, twice as much each step", "[ch08]") {
  for (int p : {2, 4, 8, 16}) {
    const int64_t count = 16 * p;
    Run r = run(p, count, input, [](Communicator& c, std::vector<float>& d) {
      doubling_all_gather(Team(c), d.data(), int64_t(d.size()));
    });
    for (int m = 0; m < p; ++m) {
      const auto& seen = r.messages[std::size_t(m)];
      INFO(p << " members: member " << m << " made " << seen.size() << " calls; doubling takes log2 p = "
             << log2_of(p) << " steps of one sendrecv each");
      REQUIRE(int(seen.size()) == log2_of(p));
      for (std::size_t k = 0; k < seen.size(); ++k) {
        const Message& msg = seen[k];
        INFO(p << " members: member " << m << " at step " << k << ": to " << msg.dst << " (" << msg.send_count
               << " floats), from " << msg.src);
        INFO("each step one partner, r XOR 2^k; a member sends all it holds final: count/p, then twice that, …");
        REQUIRE(msg.dst == msg.src);
        REQUIRE(power_of_two(m ^ msg.dst));
        CHECK(msg.send_count == (count / p) << k);
      }
    }
  }
}

// ----------------------------------------------------------------------------
// halving_doubling_all_reduce: sums for any n, the fold

TEST_CASE("halving_doubling_all_reduce: every rank gets the serial sum, n = 1 … 9 and 16, any count",
          "[ch08][needs:halving_reduce_scatter][needs:doubling_all_gather]") {
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
  for (int world : {3, 5, 6, 7}) {
    const int p = power_of_two_below(world);
    Run r = run(world, 24, contribution, [](Communicator& c, std::vector<float>& d) {
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
          INFO(world << " ranks: rank " << a << " sent to rank " << b << "; among the first p = " << p
                     << " ranks partners differ in one bit (r XOR 2^k)");
          CHECK(power_of_two(a ^ b));
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
                 "a rank sends (G-1)/G of the vector there twice, 2(G-1)/G·S = " << 2.0 * (g - 1) / g * s);
      CHECK(double(inside) == 2.0 * (g - 1) / g * s);
    }
    INFO(world << " ranks on " << nodes << " nodes: the busiest rank sent " << busiest << " bytes across nodes; "
         "a halving-doubling of S/G among the K nodes sends at most " << across_bound << ", and a flat ring's "
         "busiest rank " << 2.0 * (world - 1) / world * s);
    CHECK(double(busiest) <= across_bound);
    CHECK(busiest > 0);
    if (nodes == pk) CHECK(double(busiest) <= 2.0 * (world - 1) / world * s / g);  // 1/G of the flat ring's
  }
}

// ----------------------------------------------------------------------------
// the provided all-reduces and the clock (not holes: they must just work)

TEST_CASE("chapter: recursive doubling, the binomial tree and the pairwise phases sum exactly, n = 1 … 9 and 16",
          "[ch08]") {
  for (int world : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16})
    for (int64_t count : {0, 1, 7, 1001}) {
      for (auto [name, algorithm] : {std::make_pair("recursive doubling", recursive_doubling_all_reduce),
                                     std::make_pair("binomial tree", tree_all_reduce)}) {
        Run r = run(world, count, input, [algorithm = algorithm](Communicator& c, std::vector<float>& d) {
          algorithm(Team(c), d.data(), int64_t(d.size()));
        });
        require_serial_sums(r, world, count, name);
      }
      Run r = run(world, count, input, [](Communicator& c, std::vector<float>& d) {
        pairwise_reduce_scatter(Team(c), d.data(), int64_t(d.size()));
        pairwise_all_gather(Team(c), d.data(), int64_t(d.size()));
      });
      require_serial_sums(r, world, count, "pairwise reduce-scatter + all-gather");
    }
}

TEST_CASE("chapter: the ring (chapter 04's) sums exactly, n = 1 … 9 and 16",
          "[ch08][needs:ring_scatter_reduce][needs:ring_all_gather]") {
  for (int world : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16}) {
    Run r = run(world, 1001, input, [](Communicator& c, std::vector<float>& d) {
      ring_all_reduce(Team(c), d.data(), int64_t(d.size()));
    });
    require_serial_sums(r, world, 1001, "ring");
  }
}

TEST_CASE("chapter: recursive doubling's partners are r XOR 2^k on powers of two", "[ch08]") {
  for (int p : {2, 4, 8, 16}) {
    Run r = run(p, 64, input, [](Communicator& c, std::vector<float>& d) {
      recursive_doubling_all_reduce(Team(c), d.data(), int64_t(d.size()));
    });
    for (int m = 0; m < p; ++m) {
      REQUIRE(int(r.messages[std::size_t(m)].size()) == log2_of(p));
      for (std::size_t k = 0; k < r.messages[std::size_t(m)].size(); ++k)
        CHECK(r.messages[std::size_t(m)][k].dst == (m ^ (1 << k)));
    }
  }
}

TEST_CASE("chapter: the replay clock times messages as alpha + bytes/beta, both ends ready", "[ch08]") {
  Cluster c{3, 1, LinkModel{10.0, 8.0}, LinkModel{}};  // 10 us + 1 ns per byte
  // Rank 0 sends 1000 floats (= 4000 bytes at 4 bytes/float) to 1, then 1 to 2:
  // two messages in a chain, 14 us each.
  Schedule chain = {{{"send", 1, 1000, -1, 0}}, {{"recv", -1, 0, 0, 1000}, {"send", 2, 1000, -1, 0}},
                    {{"recv", -1, 0, 1, 1000}}};
  CHECK(replay(chain, c, 4.0) == Approx(28e-6));
  // A sendrecv pair on two ranks: both messages at once, 14 us.
  Schedule swap = {{{"sendrecv", 1, 1000, 1, 1000}}, {{"sendrecv", 0, 1000, 0, 1000}}, {}};
  CHECK(replay(swap, c, 4.0) == Approx(14e-6));
  // A send nobody receives cannot complete: an error, not a hang.
  Schedule lost = {{{"send", 1, 10, -1, 0}}, {}, {}};
  CHECK_THROWS_AS(replay(lost, c, 4.0), Error);
}

TEST_CASE("chapter: on one tier the clock equals each provided algorithm's formula", "[ch08]") {
  for (int world : {2, 3, 4, 5, 6, 7, 8, 9, 16})
    for (const std::string name : {"recursive doubling", "binomial tree"}) {
      Cluster c{world, 1, link_preset("infiniband"), link_preset("infiniband")};
      Schedule schedule = record_schedule(name, world, 1);
      for (double bytes : {4.0, 65536.0, 268435456.0}) {
        INFO(name << ", " << world << " ranks, " << bytes << " bytes");
        CHECK(clock_seconds(schedule, c, bytes) == Approx(formula_seconds(name, c, bytes)).epsilon(1e-9));
      }
    }
}

// ----------------------------------------------------------------------------
// the chapter program

TEST_CASE("chapter: ch08 --ranks 8 --nodes 2 passes every verdict",
          "[ch08][needs:halving_doubling_all_reduce][needs:two_level_all_reduce][needs:ring_scatter_reduce]"
          "[needs:ring_all_gather]") {
  auto r = dpt_test::run_program("ch08_collectives", "--ranks 8 --nodes 2 --max-ranks 8");
  INFO(dpt_test::summary_line(r.output));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("two-level: across nodes only ranks of the same local index talk") != std::string::npos);
  CHECK(r.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: under mpirun, ch08 sums, counts traffic, replays the clock and trains on 4 processes as 2 nodes",
          "[ch08][mpi][needs:halving_doubling_all_reduce][needs:two_level_all_reduce][needs:ring_scatter_reduce]"
          "[needs:ring_all_gather]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto r = dpt_test::run_mpi("ch08_collectives", 4, "--comm mpi --comm-timeout 20 --nodes 2 --max-ranks 8 --steps 20");
  INFO(dpt_test::summary_line(r.output));
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("two-level: busiest rank's inter-node bytes") != std::string::npos);
  // rank 0 records the algorithms on private threads worlds inside its process
  CHECK(r.output.find("tuner: its pick is within 1% of the clock's fastest") != std::string::npos);
  CHECK(r.output.find("training with") != std::string::npos);
}
