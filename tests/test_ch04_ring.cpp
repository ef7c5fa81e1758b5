// test_ch04_ring.cpp — chapter 04's ring by its results: ring_all_reduce
// against a serial sum and the library's Avg (Sum and Avg, the same bits on
// every rank, 500k floats), and each phase's postcondition (support/ch04_ring.h
// deals the chunks out another way than ring_chunk).
#include "support/catch.h"
#include <cmath>
#include <functional>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "ch04.h"
#include "dpt/comm/watch.h"
#include "support/ch04_phases.h"
#include "support/ch04_ring.h"
#include "support/contributions.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt_test;

TEST_CASE("ring_all_reduce: every rank gets the serial sum, any length and world", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  for (int world : {1, 2, 3, 4, 5}) {
    REQUIRE_PHASES_HOLD(world);
    for (int64_t count : {0, 1, 2, 3, 7, 64, 1001}) {  // shorter than, equal to, not divisible by world
      INFO("world " << world << ", count " << count);
      RingRun run = run_ring(world, count, all_reduce_sum);
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < count; ++i)
          if (run.data[r][i] != float(serial_sum(world, i)))
            FAIL("after the all-reduce rank " << r << "'s element " << i << " is " << run.data[r][i]
                 << ", the sum over ranks is " << serial_sum(world, i) << ": every rank must end with the sum in "
                 "every element (the scatter-reduce and all-gather tests say which phase is off)");
    }
  }
}

TEST_CASE("ring_all_reduce: Avg gives every rank the serial sum divided by n, rounded once", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  // The sums of these integers are exact in any order, so the contract's
  // bits are known without the ring: float(sum) / float(n), one correctly
  // rounded division (the library's Avg gives the same). Exact equality:
  // dividing each input before the sum, or multiplying by fl(1/n), is off
  // in the last bit for some elements once n is not a power of two.
  for (int world : {1, 2, 3, 4, 5}) {
    REQUIRE_PHASES_HOLD(world);
    RingRun run = run_ring(world, 1001, [](Communicator& comm, std::vector<float>& d) {
      ch04::ring_all_reduce(comm, d.data(), int64_t(d.size()), ReduceOp::Avg);
    });
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < 1001; ++i) {
        const float sum = float(serial_sum(world, i)), mean = sum / float(world), got = run.data[r][i];
        if (got == mean) continue;
        const float undivided = sum, times_reciprocal = sum * (1.0f / float(world));
        FAIL(std::setprecision(9) << world << " ranks, Avg: rank " << r << "'s element " << i << " is " << got << ", the sum over ranks "
             << sum << " divided by " << world << " is " << mean
             << (got == undivided ? ": it was not divided on this rank (Avg is the sum divided by n, on every rank)"
                 : got == times_reciprocal ? ": that is the bits of the sum times fl(1/n). Two ways give them: "
                                             "multiplying by 1/n (two roundings), or dividing each input before the "
                                             "sum (n roundings, then a sum of rounded values); the contract is the "
                                             "finished sum divided once, sum / n"
                 : std::fabs(got - mean) <= 1e-6f * std::fabs(mean)
                     ? ": a rounding away. Dividing every rank's input before the sum rounds n times and "
                       "adds the errors; the contract is the finished sum divided once"
                     : ": far from the mean (is every chunk divided exactly once, on every rank?)"));
      }
  }
}

TEST_CASE("ring_all_reduce: every rank ends with the same bits, and Avg is the ring's own sum / n", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  // Random floats: their sum depends on the order of the adds, so only the
  // ring's own Sum says what Avg must hold. Rank r's element i is the same
  // in both calls; every rank must agree on every bit.
  auto random_input = [](int rank, int64_t i) {
    uint32_t h = uint32_t(rank * 7919 + i * 104729 + 12345) * 2654435761u;
    return float(h % 2000003) / 1000.0f - 1000.0f + float(i % 7) * 0.1f;
  };
  for (int world : {2, 3, 5}) {
    REQUIRE_PHASES_HOLD(world);
    const int64_t count = 1003;
    std::vector<std::vector<float>> result[2];
    int k = 0;
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      result[k++] = run_ring(world, count, [&](Communicator& comm, std::vector<float>& d) {
        for (int64_t i = 0; i < count; ++i) d[std::size_t(i)] = random_input(comm.rank(), i);
        ch04::ring_all_reduce(comm, d.data(), count, op);
      }).data;
    }
    for (int which = 0; which < 2; ++which)
      for (int r = 1; r < world; ++r)
        for (int64_t i = 0; i < count; ++i)
          if (result[which][std::size_t(r)][std::size_t(i)] != result[which][0][std::size_t(i)])
            FAIL(world << " ranks, " << (which ? "Avg" : "Sum") << ": rank " << r << "'s element " << i << " is "
                 << result[which][std::size_t(r)][std::size_t(i)] << ", rank 0's is " << result[which][0][std::size_t(i)]
                 << ": every rank must end with the same bits (replicas that differ drift apart in training). "
                    "Is a chunk divided on one rank and not on another, or after the all-gather has copied it?");
    for (int64_t i = 0; i < count; ++i) {
      float sum = result[0][0][std::size_t(i)], mean = result[1][0][std::size_t(i)];
      if (mean != sum / float(world))
        FAIL(std::setprecision(9) << world << " ranks: element " << i << " is " << mean << " after Avg, but the ring's "
             << "Sum of the same inputs is " << sum << " and " << sum << " / " << world << " is " << sum / float(world)
             << (mean == sum * (1.0f / float(world))
                     ? ": that is the bits of the sum times fl(1/n). Two ways give them: multiplying by 1/n (two "
                       "roundings), or dividing each input before the sum (n roundings, then a sum of rounded "
                       "values); the contract is the finished sum divided once, sum / n"
                     : ": Avg must be the ring's sum divided by n once (dividing the inputs first rounds each of "
                       "them, and the rounding errors add up)"));
    }
  }
}

TEST_CASE("ring_all_reduce: 500k floats (above any eager limit) on 2 and 4 rank threads", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  // Above an eager limit a send waits for its receive, as MPI's rendezvous
  // does: a ring that sends then receives on every rank deadlocks here and
  // the communicator's timeout names the waiting ranks.
  for (int world : {2, 4}) {
    INFO("world " << world);
    REQUIRE_PHASES_HOLD(world);
    const int64_t count = 500000;
    RingRun run = run_ring(world, count, all_reduce_sum);
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < count; i += 997) {
        INFO("rank " << r << "'s element " << i << " must be the sum over ranks");
        REQUIRE(run.data[r][i] == float(serial_sum(world, i)));
      }
  }
}

using dpt_test::all_once;
using dpt_test::contribution;
using dpt_test::contributions;

namespace {
// run_ring for one phase, through a communicator that records where each rank
// sends before each send leaves. A ring turned the wrong way stops on a size
// mismatch; the recorded destinations name the cause first.
RingRun run_watched(const char* name, int world, int64_t count,
                    const std::function<void(Communicator&, std::vector<float>&)>& phase) {
  std::vector<std::vector<int>> sent_to(static_cast<std::size_t>(world));
  try {
    return run_ring(world, count, [&](Communicator& comm, std::vector<float>& d) {
      const int rank = comm.rank();
      auto watched = watch_messages(comm, [&](const Message& m) {
        if (m.dst >= 0) sent_to[std::size_t(rank)].push_back(m.dst);
      });
      phase(*watched, d);
    });
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    for (int r = 0; r < world; ++r)
      for (int dst : sent_to[std::size_t(r)])
        if (dst != (r + 1) % world)
          FAIL(world << " ranks, " << count << " floats: in " << name << " rank " << r << " sent to rank " << dst
               << (dst == (r + world - 1) % world ? ", its LEFT neighbour (r-1) mod n" : ", not a neighbour")
               << ": every message goes right, to (r+1) mod n = " << (r + 1) % world
               << ". (The phase then stopped: " << e.what() << ")");
    FAIL(world << " ranks, " << count << " floats: " << name << " stopped with an error: " << e.what());
  }
  return {};
}
}  // namespace

TEST_CASE("ring_scatter_reduce: rank r ends owning chunk (r+1) mod n, every contribution counted once", "[ch04][needs:ring_chunk]") {
  for (int world : {2, 3, 4, 5})
    for (int64_t count : {int64_t(world), int64_t(10)}) {  // one element per chunk; chunks of unequal size
      std::string failed =
          scatter_reduce_failure(run_watched("scatter-reduce", world, count, scatter_reduce_phase()), world, count);
      if (!failed.empty()) FAIL(failed);
    }
}

TEST_CASE("ring_all_gather: every rank ends with a copy of every owner's finished chunk", "[ch04][needs:ring_chunk]") {
  for (int world : {2, 3, 4}) {
    std::string failed = all_gather_failure(run_watched("all-gather", world, kGatherCount, all_gather_phase(world)), world);
    if (!failed.empty()) FAIL(failed);
  }
}
