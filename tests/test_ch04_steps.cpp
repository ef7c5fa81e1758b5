// test_ch04_steps.cpp — chapter 04's ring by how it runs: the messages each
// phase sends (n-1 steps, one whole chunk right and one from the left), no
// deadlock when each send waits for its receive, and the traffic log (only
// the right neighbour, exactly the ring's bytes).
#include "support/catch.h"
#include <string>
#include <vector>

#include "ch04.h"
#include "dpt/comm/watch.h"
#include "support/ch04_ring.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt_test;

namespace {
// Every rank's messages during one phase, as a watching communicator saw them
// (up to the error that stopped the phase, if one did: `error` says it).
std::vector<std::vector<Message>> phase_messages(int world, int64_t count,
                                                 void (*phase)(Communicator&, float*, int64_t), std::string& error) {
  std::vector<std::vector<Message>> seen(static_cast<std::size_t>(world));
  try {
    dpt_test::run_ranks(world, [&](Context& ctx) {
      std::vector<float> data(std::size_t(count), 1.0f);
      auto watched = watch_messages(ctx.comm, [&](const Message& m) { seen[std::size_t(ctx.rank)].push_back(m); });
      phase(*watched, data.data(), count);
    }, 3.0);
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    error = e.what();
  }
  return seen;
}
}  // namespace

TEST_CASE("ring_scatter_reduce: n-1 steps, each one whole chunk right and one from the left", "[ch04][needs:ring_chunk]") {
  for (int world : {2, 3, 4, 5}) {
    const int64_t count = 10;  // chunks of 3, 3, 2, 2 at n = 4: a send of a wrong size shows
    for (auto phase : {std::make_pair("scatter-reduce", ch04::ring_scatter_reduce),
                       std::make_pair("all-gather", ch04::ring_all_gather)}) {
      std::string error;
      auto seen = phase_messages(world, count, phase.second, error);
      for (int r = 0; r < world; ++r) {
        int right = (r + 1) % world, left = (r + world - 1) % world, sends = 0, receives = 0;
        for (const Message& m : seen[std::size_t(r)]) {
          if (m.dst >= 0) {
            ++sends;
            INFO(phase.first << ", " << world << " ranks: rank " << r << " sent " << m.send_count << " floats to rank "
                             << m.dst << " (" << m.call << ")");
            INFO("in a ring each rank sends only to its right neighbour, (r+1) mod n = " << right);
            CHECK(m.dst == right);
            bool whole = false;
            for (int c = 0; c < world; ++c) whole = whole || m.send_count == dealt_chunk(count, world, c).size();
            INFO("each message is one whole chunk (a ring_chunk size), not part of one or several");
            CHECK(whole);
          }
          if (m.src >= 0) {
            ++receives;
            INFO(phase.first << ", " << world << " ranks: rank " << r << " received from rank " << m.src);
            INFO("in a ring each rank receives only from its left neighbour, (r-1) mod n = " << left);
            CHECK(m.src == left);
          }
        }
        INFO(phase.first << ", " << world << " ranks: rank " << r << " sent " << sends << " and received " << receives
                         << " messages");
        INFO("a phase is n-1 = " << world - 1 << " steps of one send and one receive each");
        CHECK((sends == world - 1 && receives == world - 1));
      }
      if (!error.empty()) FAIL(phase.first << ", " << world << " ranks, stopped by an error: " << error);
    }
  }
}

TEST_CASE("ring_scatter_reduce: every rank steps at once without deadlock, even when each send waits for its receive",
          "[ch04][needs:ring_chunk]") {
  // The test world has no send buffer (eager limit 0, as MPI allows for any
  // send): a send returns only once its receive is posted.
  for (int world : {2, 3}) {
    try {
      dpt_test::run_ranks(world, [&](Context& ctx) {
        std::vector<float> data(100, 1.0f);
        ch04::ring_scatter_reduce(ctx.comm, data.data(), 100);
      }, 3.0);
    } catch (const Timeout& e) {
      FAIL(world << " ranks deadlocked in scatter-reduce: every rank waited for a peer that was itself waiting. "
           "When every rank sends first and receives after, no receive is ever posted for a send that waits for "
           "one (communicator.h, rendezvous). The timeout said: " << e.what());
    }
  }
}

TEST_CASE("ring_all_reduce: each rank sends only to its right neighbour", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  for (int world : {2, 3, 4}) {
    RingRun run = run_ring(world, 1000, all_reduce_sum);
    for (int src = 0; src < world; ++src)
      for (int dst = 0; dst < world; ++dst) {
        INFO(world << " ranks, the traffic log of one all-reduce: rank " << src << " sent " << run.traffic[src][dst]
             << " bytes to rank " << dst);
        if (dst == (src + 1) % world) {
          INFO("a ring all-reduce sends to the right neighbour: through the two phases' messages, not through "
               "another collective (comm.all_reduce is the library's, not the ring)");
          CHECK(run.traffic[src][dst] > 0);
        } else {
          INFO("a ring all-reduce sends to nobody but the right neighbour");
          CHECK(run.traffic[src][dst] == 0);  // a ring through rank 0, or a broadcast, fails here
        }
      }
  }
}

TEST_CASE("ring_all_reduce: each rank sends 2(n-1)/n*S bytes, all ranks 2(n-1)*S exactly", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  for (int world : {2, 3, 4}) {
    for (int64_t count : {1000, 1001, 3}) {
      INFO("world " << world << ", count " << count);
      RingRun run = run_ring(world, count, all_reduce_sum);
      const double s = double(count) * 4;
      int64_t total = 0;
      for (int r = 0; r < world; ++r) {
        int64_t sent = 0;
        for (int d = 0; d < world; ++d) sent += run.traffic[r][d];
        total += sent;
        // Chunks differ by at most one float; 2(n−1) sends → at most 2(n−1)·4 bytes off.
        CHECK(std::abs(double(sent) - 2.0 * (world - 1) / world * s) <= 2.0 * (world - 1) * 4);
      }
      // Every chunk travels n−1 hops in each phase: 2(n−1)·S in all, with no slack.
      CHECK(total == int64_t(2 * (world - 1) * s));
    }
  }
}
