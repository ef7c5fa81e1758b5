// test_ch04_steps.cpp — chapter 04's ring by how it runs: the messages each
// phase sends (n-1 steps, one whole chunk right and one from the left), no
// deadlock when each send waits for its receive, the traffic log (only the
// right neighbour, exactly the ring's bytes) and what Avg's all-gather sends.
#include "support/catch.h"
#include <iomanip>
#include <string>
#include <vector>

#include "ch04.h"
#include "dpt/comm/watch.h"
#include "support/ch04_phases.h"
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

namespace {
// One phase's messages on 2 to 5 ranks against the contract's pattern: each
// send goes to the right neighbour and is one whole chunk, each receive comes
// from the left, n-1 of each. The direction is checked before anything else:
// a ring turned the wrong way also sends chunks of the wrong size, and the
// communicator's complaint about sizes would hide the cause.
void check_phase_messages(const char* name, void (*phase)(Communicator&, float*, int64_t)) {
  for (int world : {2, 3, 4, 5}) {
    const int64_t count = 10;  // chunks of 3, 3, 2, 2 at n = 4: a send of a wrong size shows
    std::string error;
    auto seen = phase_messages(world, count, phase, error);
    for (int r = 0; r < world; ++r) {
      const int right = (r + 1) % world, left = (r + world - 1) % world;
      int sends = 0, receives = 0;
      for (const Message& m : seen[std::size_t(r)]) {
        if (m.dst >= 0) {
          ++sends;
          if (m.dst != right)
            FAIL(name << ", " << world << " ranks: rank " << r << " sent " << m.send_count << " floats to rank "
                 << m.dst << " (" << m.call << ")"
                 << (m.dst == left ? ", its LEFT neighbour (r-1) mod n" : ", which is not its neighbour")
                 << ": in a ring every message goes right, to (r+1) mod n = " << right
                 << ", and every receive comes from the left");
          bool whole = false;
          for (int c = 0; c < world; ++c) whole = whole || m.send_count == dealt_chunk(count, world, c).size();
          if (!whole)
            FAIL(name << ", " << world << " ranks: rank " << r << " sent " << m.send_count << " floats, not the "
                 "size of any chunk of " << count << ": each message is one whole chunk (a ring_chunk size), not "
                 "part of one or several");
        }
        if (m.src >= 0) {
          ++receives;
          if (m.src != left)
            FAIL(name << ", " << world << " ranks: rank " << r << " received from rank " << m.src
                 << (m.src == right ? ", its RIGHT neighbour (r+1) mod n" : ", which is not its neighbour")
                 << ": in a ring every receive comes from the left, (r-1) mod n = " << left);
        }
      }
      if (error.empty() && (sends != world - 1 || receives != world - 1))
        FAIL(name << ", " << world << " ranks: rank " << r << " sent " << sends << " and received " << receives
             << " messages: a phase is n-1 = " << world - 1 << " steps of one send and one receive each");
    }
    if (!error.empty()) FAIL(name << ", " << world << " ranks, stopped by an error: " << error);
  }
}
}  // namespace

TEST_CASE("ring_scatter_reduce: n-1 steps, each one whole chunk right and one from the left", "[ch04][needs:ring_chunk]") {
  check_phase_messages("scatter-reduce", ch04::ring_scatter_reduce);
}

TEST_CASE("ring_all_gather: n-1 steps, each one whole chunk right and one from the left", "[ch04][needs:ring_chunk]") {
  check_phase_messages("all-gather", ch04::ring_all_gather);
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

TEST_CASE("ring_all_reduce: with Avg, each element is divided once, on one rank (watched as the all-gather sends)", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  // Each element is divided once, on one rank, and the all-gather only copies
  // (ch04.h): so its first message from rank r must
  // carry a chunk that is finished on r at that moment, and the only one is
  // r's own, chunk (r+1) mod n. So when rank r's n-th send (the first after
  // the scatter-reduce's n-1) is about to leave, that chunk must hold the
  // mean already. A watching communicator calls us just before the send; the
  // integer inputs (support/exact_sums.h) make the mean's bits known exactly.
  for (int world : {2, 3, 4}) {
    REQUIRE_PHASES_HOLD(world);
    const int64_t count = 10;
    std::vector<std::vector<float>> at_send(static_cast<std::size_t>(world));  // rank r's own chunk as the send left
    std::vector<std::vector<float>> whole(static_cast<std::size_t>(world));    // rank r's whole vector then
    std::vector<std::vector<float>> reduced(static_cast<std::size_t>(world));  // what the scatter-reduce alone leaves
    std::vector<int> sends(static_cast<std::size_t>(world), 0);
    dpt_test::run_ranks(world, [&](Context& ctx) {
      const Range own = dealt_chunk(count, world, (ctx.rank + 1) % world);
      std::vector<float> data(static_cast<std::size_t>(count));
      for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = input(ctx.rank, i);
      std::vector<float> alone = data;
      ch04::ring_scatter_reduce(ctx.comm, alone.data(), count);
      reduced[std::size_t(ctx.rank)] = alone;
      auto watched = watch_messages(ctx.comm, [&](const Message& m) {
        if (m.dst < 0) return;
        if (sends[std::size_t(ctx.rank)]++ == world - 1) {
          at_send[std::size_t(ctx.rank)].assign(data.begin() + own.begin, data.begin() + own.end);
          whole[std::size_t(ctx.rank)] = data;
        }
      });
      ch04::ring_all_reduce(*watched, data.data(), count, ReduceOp::Avg);
    }, 3.0);
    for (int r = 0; r < world; ++r) {
      if (sends[std::size_t(r)] != 2 * (world - 1))
        FAIL(world << " ranks, Avg: rank " << r << " sent " << sends[std::size_t(r)] << " messages, not 2(n-1) = "
             << 2 * (world - 1) << " (the tests of each phase's steps say which phase is off)");
      const int owned = (r + 1) % world;
      const Range own = dealt_chunk(count, world, owned);
      for (int64_t i = own.begin; i < own.end; ++i) {
        const float sum = float(serial_sum(world, i)), mean = sum / float(world);
        const float sent = at_send[std::size_t(r)][std::size_t(i - own.begin)];
        if (sent == mean) continue;
        FAIL(std::setprecision(9) << world << " ranks, Avg: when rank " << r << "'s all-gather sent its finished "
             "chunk " << owned << " (its first message after the scatter-reduce), element " << i << " of it held "
             << sent << ", not the mean " << mean
             << (sent == sum ? ": the sum, not yet divided. ch04.h has every element divided exactly once, on "
                               "one rank (about count/n per rank, never the whole vector): the all-gather only "
                               "copies, so what it carries must be the mean, not sums every rank divides afterwards"
                             : ": with Avg what the all-gather sends must already be the finished sum divided by n"));
      }
      // Between the phases only the owned chunk may change: any other chunk
      // must still hold what the scatter-reduce alone leaves there (the same
      // inputs, the same deterministic ring), not that divided by n.
      for (int c = 0; c < world; ++c) {
        if (c == owned) continue;
        const Range other = dealt_chunk(count, world, c);
        for (int64_t i = other.begin; i < other.end; ++i) {
          const float before = reduced[std::size_t(r)][std::size_t(i)], then = whole[std::size_t(r)][std::size_t(i)];
          if (before == then) continue;
          FAIL(std::setprecision(9) << world << " ranks, Avg: when rank " << r << "'s all-gather sent its first "
               "message, element " << i << " of chunk " << c << " (not its own) held " << then << ", where the "
               "scatter-reduce alone leaves " << before << (then == before / float(world) ? " (that divided by n)" : "")
               << ": ch04.h has each rank divide about count/n floats, never the whole vector; the chunks a rank "
               "does not own are overwritten by the all-gather anyway");
        }
      }
    }
  }
}
