// test_ch08_chapter.cpp — chapter 08's provided code (not holes: it must just
// work): recursive doubling, the binomial tree, the pairwise phases and the
// ring sum exactly; the replay clock against the formulas; then the program,
// ch08_collectives, with threads and under mpirun.
#include "support/catch.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ch08.h"
#include "cost_model.h"
#include "support/ch08_run.h"
#include "support/run_program.h"
#include "sweep.h"

using namespace dpt;
using namespace dpt::ch08;
using dpt_test::input;
using dpt_test::log2_of;
using dpt_test::Run;
using dpt_test::run;
using dpt_test::require_serial_sums;

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

TEST_CASE("chapter: recursive doubling exchanges the whole vector in pairs, a new partner each of log2 p steps",
          "[ch08]") {
  for (int p : {2, 4, 8, 16}) {
    Run r = run(p, 64, input, [](Communicator& c, std::vector<float>& d) {
      recursive_doubling_all_reduce(Team(c), d.data(), int64_t(d.size()));
    });
    for (int m = 0; m < p; ++m) {
      const auto& seen = r.messages[std::size_t(m)];
      REQUIRE(int(seen.size()) == log2_of(p));
      std::vector<int> partners;
      for (std::size_t k = 0; k < seen.size(); ++k) {
        const int q = seen[k].dst;
        INFO(p << " ranks: rank " << m << " at step " << k << " sent to " << q);
        REQUIRE(q >= 0);
        REQUIRE(q != m);
        CHECK(seen[k].send_count == 64);
        CHECK(std::find(partners.begin(), partners.end(), q) == partners.end());
        partners.push_back(q);
        CHECK(r.messages[std::size_t(q)][k].dst == m);  // a pairing: q's partner at step k is m
      }
    }
  }
}

// ----------------------------------------------------------------------------
// the chapter program

TEST_CASE("chapter: bare ch08 runs 8 ranks on 2 nodes and passes every verdict",
          "[ch08][needs:halving_doubling_all_reduce][needs:two_level_all_reduce][needs:ring_scatter_reduce]"
          "[needs:ring_all_gather]") {
  auto r = dpt_test::run_program("ch08_collectives", "");
  INFO(dpt_test::summary_line(r.output));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("8 ranks as 2 node(s)") != std::string::npos);
  CHECK(r.output.find("two-level: across nodes only ranks of the same local index talk") != std::string::npos);
  CHECK(r.output.find("cannot fail") == std::string::npos);
  CHECK(r.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: on one rank ch08's distributed verdicts say they cannot fail, never a tick",
          "[ch08][needs:halving_doubling_all_reduce][needs:two_level_all_reduce][needs:ring_scatter_reduce]"
          "[needs:ring_all_gather]") {
  auto r = dpt_test::run_program("ch08_collectives", "--ranks 1 --steps 2 --max-ranks 4");
  INFO(dpt_test::summary_line(r.output));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("every rank ends with the serial sum — cannot fail on 1 rank") != std::string::npos);
  CHECK(r.output.find("\u2714 ring: every rank ends with the serial sum") == std::string::npos);
  CHECK(r.output.find("replicas identical — cannot fail on 1 rank") != std::string::npos);
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
