// test_ch04.cpp — chapter 04's holes: the chunks against their postconditions,
// the ring's result against a serial sum and the library's Avg (Sum and Avg,
// the same bits on every rank), its algorithm against the traffic log (only the right
// neighbour, exactly the ring's bytes), a message large enough to deadlock an
// unsafe send/recv order (threads and real mpirun), and the chapter's training
// against one device. These need only chapter 04's holes: the training loop is
// the core's, and the timing table skips chapter 03's naive average if unwritten.
#include "support/catch.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <tuple>
#include <mutex>

#include "ch04.h"
#include "dpt/comm/watch.h"
#include "support/contributions.h"
#include "support/ranks.h"
#include "support/single_device.h"

using namespace dpt;

namespace {
// The chunking the contract pins down, found another way than ring_chunk's:
// deal the elements out one at a time to the chunks 0, 1, …, n−1, 0, 1, …
// (sizes differ by at most one, the larger first), then lay the chunks end
// to end.
ch04::Chunk dealt_chunk(int64_t count, int n, int i) {
  std::vector<int64_t> sizes(std::size_t(n), 0);
  for (int64_t e = 0; e < count; ++e) ++sizes[std::size_t(e % n)];
  ch04::Chunk chunk;
  for (int c = 0; c < i; ++c) chunk.begin += sizes[std::size_t(c)];
  chunk.end = chunk.begin + sizes[std::size_t(i)];
  return chunk;
}
}  // namespace

TEST_CASE("ring_chunk: the chunks tile the vector in order, no element lost or shared", "[ch04]") {
  for (int n = 1; n <= 9; ++n)
    for (int64_t count : {0, 1, 2, 3, 7, 10, 64, 1001}) {
      int64_t expected_begin = 0;  // where the next chunk must begin
      for (int i = 0; i < n; ++i) {
        ch04::Chunk c = ch04::ring_chunk(count, n, i);
        INFO(count << " elements in " << n << " chunks: chunk " << i << " is [" << c.begin << ", " << c.end << ")");
        if (c.begin != expected_begin)
          FAIL((i == 0 ? "chunk 0 must begin at 0" : "chunk " + std::to_string(i) + " must begin where chunk " +
                std::to_string(i - 1) + " ends, at " + std::to_string(expected_begin)) +
               (c.begin > expected_begin ? ": the elements in between belong to no chunk"
                                         : ": the elements in between are in two chunks"));
        if (c.end < c.begin) FAIL("a chunk's end comes before its begin: its size is negative");
        if (c.end > count)
          FAIL("the chunk runs past the vector's end (" << count << " elements): the ring would read and write "
               "floats that are not there. Sizes rounded up leave too little for the last chunks.");
        expected_begin = c.end;
      }
      if (expected_begin != count)
        FAIL(count << " elements in " << n << " chunks: the last chunk ends at " << expected_begin << ", not at "
             << count << ": the last " << count - expected_begin << " elements belong to no chunk (the remainder "
             "count mod n must go somewhere: sizes rounded down lose it)");
    }
}

TEST_CASE("ring_chunk: sizes differ by at most one, the larger chunks first", "[ch04]") {
  for (int n = 1; n <= 9; ++n)
    for (int64_t count : {0, 1, 2, 3, 7, 10, 64, 1001}) {
      int64_t smallest = count, largest = 0;
      for (int i = 0; i < n; ++i) {
        int64_t size = ch04::ring_chunk(count, n, i).size();
        smallest = std::min(smallest, size), largest = std::max(largest, size);
        if (i > 0 && size > ch04::ring_chunk(count, n, i - 1).size())
          FAIL(count << " elements in " << n << " chunks: chunk " << i << " has " << size << " elements, chunk "
               << i - 1 << " only " << ch04::ring_chunk(count, n, i - 1).size()
               << ": sizes must never grow with i (the extra elements go to the first chunks, not the last)");
      }
      if (largest - smallest > 1)
        FAIL(count << " elements in " << n << " chunks: sizes from " << smallest << " to " << largest
             << ": they must differ by at most one, so that no rank of the ring waits for a chunk much larger "
                "than the others");
    }
}

TEST_CASE("ring_chunk: a chunk of a huge vector comes at once (O(1), no walk over earlier chunks)", "[ch04]") {
  // n near 2^31 and 2^62 elements: a loop over the chunks before i takes
  // seconds per call, integer arithmetic nanoseconds. 0.2 s for 1000 calls
  // leaves a slow shared machine 1000 times the room it needs.
  const int n = 2147483647;
  const int64_t count = int64_t(1) << 62;
  auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < 1000; ++k) {
    int i = n - 1 - k * 1000;
    ch04::Chunk c = ch04::ring_chunk(count, n, i);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0.2)
      FAIL("ring_chunk took " << seconds << " s for " << k + 1 << " chunks of a vector of 2^62 floats in " << n
           << " chunks: compute chunk i from count, n and i alone, not by walking the chunks before it");
    // The chunks after i hold (n−1−i)·base elements plus one each for those
    // of them among the first count mod n: chunk i ends where they begin.
    const int64_t base = count / n, extra = count % n;
    const int64_t end = count - int64_t(n - 1 - i) * base - std::max<int64_t>(0, extra - (i + 1));
    if (c.end != end || c.size() < base || c.size() > base + 1)
      FAIL("chunk " << i << " of " << n << " over 2^62 elements is [" << c.begin << ", " << c.end << "); it must be "
           << "[" << end - base - (i < extra ? 1 : 0) << ", " << end << "), the chunks after it being laid up to the "
           "vector's end (does an intermediate product overflow, or a remainder go astray?)");
  }
}

TEST_CASE("ring_chunk: a chunk that does not exist is an error that says so", "[ch04]") {
  {
    INFO("a real chunk first: 10 elements in 4 chunks, chunk 3 has 2 (the other ring_chunk tests say what is off)");
    REQUIRE(ch04::ring_chunk(10, 4, 3).size() == 2);  // the untouched hole stops here, with NotImplemented
  }
  for (auto bad : {std::make_tuple(int64_t(10), 4, 4), std::make_tuple(int64_t(10), 4, -1),
                   std::make_tuple(int64_t(-1), 4, 0)}) {
    INFO("ring_chunk(" << std::get<0>(bad) << ", " << std::get<1>(bad) << ", " << std::get<2>(bad)
         << ") must throw dpt::Error: count >= 0, n >= 1 and 0 <= i < n are its preconditions");
    CHECK_THROWS_AS(ch04::ring_chunk(std::get<0>(bad), std::get<1>(bad), std::get<2>(bad)), Error);
  }
}

namespace {
// Rank r's input element i: distinct per rank and element, exactly
// representable, so the serial sum below is exact whatever the order.
float input(int rank, int64_t i) { return float((rank + 1) * 1000 + i % 997); }

double serial_sum(int world, int64_t i) {
  double s = 0;
  for (int r = 0; r < world; ++r) s += input(r, i);
  return s;
}

// Runs `phase` on every rank of a `world`-rank threads world with each rank's
// input vector; returns each rank's vector afterwards and the traffic matrix.
struct RingRun {
  std::vector<std::vector<float>> data;
  std::vector<std::vector<int64_t>> traffic;
};
RingRun run_ring(int world, int64_t count, const std::function<void(Communicator&, std::vector<float>&)>& phase) {
  RingRun out;
  out.data.resize(world);
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    std::vector<float> data(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) data[i] = input(ctx.rank, i);
    phase(ctx.comm, data);
    ctx.comm.barrier();  // every send is logged before rank 0 reads the table
    std::lock_guard<std::mutex> lock(mutex);
    out.data[ctx.rank] = data;
    if (ctx.is_root()) out.traffic = ctx.comm.traffic().matrix();
  });
  return out;
}

void all_reduce_sum(Communicator& comm, std::vector<float>& d) {
  ch04::ring_all_reduce(comm, d.data(), int64_t(d.size()), ReduceOp::Sum);
}
}  // namespace

TEST_CASE("ring_all_reduce: every rank gets the serial sum, any length and world", "[ch04][needs:ring_scatter_reduce][needs:ring_all_gather][needs:ring_chunk]") {
  for (int world : {1, 2, 3, 4, 5}) {
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
                 : got == times_reciprocal ? ": that is the sum times fl(1/n), which rounds twice; the contract is one "
                                             "division, sum / n"
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
                     ? ": that is the sum times fl(1/n), which rounds twice; the contract is one division, sum / n"
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

TEST_CASE("ring_scatter_reduce: rank r ends owning chunk (r+1) mod n, every contribution counted once", "[ch04][needs:ring_chunk]") {
  for (int world : {2, 3, 4, 5}) {
    for (int64_t count : {int64_t(world), int64_t(10)}) {  // one element per chunk; chunks of unequal size
      RingRun run = run_ring(world, count, [](Communicator& comm, std::vector<float>& d) {
        std::fill(d.begin(), d.end(), contribution(comm.rank()));
        ch04::ring_scatter_reduce(comm, d.data(), int64_t(d.size()));
      });
      for (int r = 0; r < world; ++r) {
        int owned = (r + 1) % world;
        ch04::Chunk chunk = dealt_chunk(count, world, owned);
        for (int64_t i = chunk.begin; i < chunk.end; ++i)
          if (run.data[r][i] != all_once(world))
            FAIL(world << " ranks, " << count << " floats: after scatter-reduce rank " << r << "'s chunk " << owned
                       << " (the one it must own) holds " << contributions(run.data[r][i], world)
                       << ". A partial sum must travel the whole ring, picking up each rank's contribution exactly "
                          "once, and end on its owner.");
      }
    }
  }
}

TEST_CASE("ring_all_gather: every rank ends with a copy of every owner's finished chunk", "[ch04][needs:ring_chunk]") {
  for (int world : {2, 3, 4}) {
    const int64_t count = 8;
    // Rank r's finished chunk (r+1) mod n holds 100·(chunk+1)+i; elsewhere this
    // rank holds 10000·(rank+1) + i, which no finished value equals.
    auto finished = [&](int64_t i) {
      for (int c = 0; c < world; ++c) {
        ch04::Chunk ch = dealt_chunk(count, world, c);
        if (i >= ch.begin && i < ch.end) return float(100 * (c + 1) + i);
      }
      return -2.0f;
    };
    RingRun run = run_ring(world, count, [&](Communicator& comm, std::vector<float>& d) {
      ch04::Chunk mine = dealt_chunk(count, world, (comm.rank() + 1) % world);
      for (int64_t i = 0; i < count; ++i)
        d[i] = (i >= mine.begin && i < mine.end) ? finished(i) : float(10000 * (comm.rank() + 1) + i);
      ch04::ring_all_gather(comm, d.data(), count);
    });
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < count; ++i) {
        float got = run.data[r][i], want = finished(i), stale = float(10000 * (r + 1) + i);
        if (got == want) continue;
        FAIL(world << " ranks: after all-gather rank " << r << " element " << i << " is " << got
                   << ", the owner's finished value is " << want
                   << (got == stale ? " (it never arrived: every chunk must reach every rank in n-1 steps)"
                       : got == want + stale ? " (it was added to this rank's old value: all-gather copies, it does not add)"
                                             : " (a chunk other than the owner's finished one arrived there)"));
      }
  }
}

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

namespace {
// The chapter's own demos (explain, check, timing) shrunk to a minimum.
const char* kQuickDemos = "--no-explain --max-bytes 4096 --reps 1 --check-size 100";
}  // namespace

TEST_CASE("chapter: ch04's verdicts pass and say what the traffic log shows", "[ch04]") {
  auto run = dpt_test::run_program("ch04_ring_allreduce", std::string("--ranks 3 ") + kQuickDemos + " " +
                                                              dpt_test::small_problem(8));
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("one all-reduce: each rank sends only to its right neighbour") != std::string::npos);
  CHECK(run.output.find("training: each rank sends only to its right neighbour") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch04 trains with the ring and matches one device", "[ch04]") {
  dpt_test::check_matches_single_device("ch04_ring_allreduce", 3, false, kQuickDemos);
}

TEST_CASE("chapter: under mpirun, the ring trains 2 and 4 processes like one device", "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (int np : {2, 4}) dpt_test::check_matches_single_device("ch04_ring_allreduce", np, true, kQuickDemos);
}

TEST_CASE("chapter: under mpirun, the ring sums 500k floats on 2 and 4 processes (no send/recv deadlock)",
          "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  // 2 MB messages: far above Open MPI's eager limit (64 KiB on shared
  // memory), so a blocking send before the recv waits for a peer that is
  // itself blocked in send; the 5 s timeout turns that hang into a failure.
  for (int np : {2, 4}) {
    INFO("mpirun -np " << np);
    auto run = dpt_test::run_mpi("ch04_ring_allreduce", np,
                                 "--comm mpi --comm-timeout 5 --no-explain --max-bytes 4096 --reps 1 "
                                 "--check-size 500000 --no-verify --steps 1 --quiet --model 32-16-4 --samples 256");
    INFO(dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 0);
  }
}

TEST_CASE("chapter: ring replicas start from the master copy (--load-weights)", "[ch04]") {
  dpt_test::check_matches_single_device("ch04_ring_allreduce", 3, false, kQuickDemos,
                                       dpt_test::load_master_weights_flag(7));
}

TEST_CASE("chapter: under mpirun, ranks started with different ch04 flags stop naming the flag", "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  // A rank timing other sizes (or drawing while the other does not) would
  // wait in a collective its peer never calls: the timeout is 20 s, the
  // agreement check must answer at once, naming the flag.
  const std::string program = dpt_test::program_path("ch04_ring_allreduce") +
                              " --comm mpi --comm-timeout 20 --quiet --no-verify --steps 1 --model 32-16-4 --samples 64 "
                              "--reps 1 ";
  const std::string rank0 = "--max-bytes 4096 --check-size 100";
  // Rank 1 differs from rank 0 in one flag: {its flags, the flag's name}.
  for (auto differs : {std::make_pair("--max-bytes 32768 --check-size 100", "--max-bytes"),
                       std::make_pair("--max-bytes 4096 --check-size 101", "--check-size"),
                       std::make_pair("--max-bytes 4096 --check-size 100 --no-explain", "--explain")}) {
    auto run = dpt_test::run_mpmd(program + rank0, program + differs.first);
    INFO(differs.first << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, contains_text(differs.second) && contains_text("every rank needs the same flags"));
  }
}

TEST_CASE("chapter: under mpirun, ranks with and without --quiet still draw the ring together", "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  // --quiet may differ between ranks (rank 0 alone talks); the drawing is
  // collective, so a quiet rank must still take part in it.
  const std::string program = dpt_test::program_path("ch04_ring_allreduce") +
                              " --comm mpi --comm-timeout 20 --no-verify --steps 1 --model 32-16-4 --samples 64 "
                              "--check-size 100 --reps 1 --max-bytes 4096";
  auto run = dpt_test::run_mpmd(program, program + " --quiet");
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, contains_text("scatter-reduce step 1/1"));
}
