// test_ch04.cpp — chapter 04's holes: the ring's result against a serial sum,
// its algorithm against the traffic log (only the right neighbour, exactly the
// ring's bytes), and the chapter's training against one device.
#include "support/catch.h"
#include <mutex>

#include "ch04_holes.h"
#include "support/ranks.h"
#include "support/single_device.h"

using namespace dpt;

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

TEST_CASE("ring_all_reduce: every rank gets the serial sum, any length and world", "[ch04]") {
  for (int world : {1, 2, 3, 4, 5}) {
    for (int64_t count : {0, 1, 2, 3, 7, 64, 1001}) {  // shorter than, equal to, not divisible by world
      INFO("world " << world << ", count " << count);
      RingRun run = run_ring(world, count, all_reduce_sum);
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < count; ++i) REQUIRE(run.data[r][i] == float(serial_sum(world, i)));
    }
  }
}

TEST_CASE("ring_scatter_reduce: rank r ends with the full sum of chunk (r+1) mod n", "[ch04]") {
  const int world = 4;
  const int64_t count = 10;  // chunks of 3, 3, 2, 2
  RingRun run = run_ring(world, count, [](Communicator& comm, std::vector<float>& d) {
    ch04::ring_scatter_reduce(comm, d.data(), int64_t(d.size()));
  });
  for (int r = 0; r < world; ++r) {
    ch04::Chunk owned = ch04::ring_chunk(count, world, (r + 1) % world);
    for (int64_t i = owned.begin; i < owned.end; ++i) CHECK(run.data[r][i] == float(serial_sum(world, i)));
  }
}

TEST_CASE("ring_all_gather: every rank ends with every rank's finished chunk", "[ch04]") {
  const int world = 3;
  const int64_t count = 8;
  // Rank r's finished chunk (r+1) mod n holds 100·(chunk)+i; the rest is junk (−1).
  auto finished = [&](int64_t i) {
    for (int c = 0; c < world; ++c) {
      ch04::Chunk ch = ch04::ring_chunk(count, world, c);
      if (i >= ch.begin && i < ch.end) return float(100 * c + i);
    }
    return -2.0f;
  };
  RingRun run = run_ring(world, count, [&](Communicator& comm, std::vector<float>& d) {
    ch04::Chunk mine = ch04::ring_chunk(count, world, (comm.rank() + 1) % world);
    for (int64_t i = 0; i < count; ++i) d[i] = (i >= mine.begin && i < mine.end) ? finished(i) : -1.0f;
    ch04::ring_all_gather(comm, d.data(), count);
  });
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < count; ++i) CHECK(run.data[r][i] == finished(i));
}

TEST_CASE("ring_all_reduce: each rank sends only to its right neighbour", "[ch04]") {
  for (int world : {2, 3, 4}) {
    INFO("world " << world);
    RingRun run = run_ring(world, 1000, all_reduce_sum);
    for (int src = 0; src < world; ++src)
      for (int dst = 0; dst < world; ++dst) {
        INFO("from " << src << " to " << dst);
        if (dst == (src + 1) % world) CHECK(run.traffic[src][dst] > 0);
        else CHECK(run.traffic[src][dst] == 0);  // a ring through rank 0, or a broadcast, fails here
      }
  }
}

TEST_CASE("ring_all_reduce: each rank sends 2(n-1)/n*S bytes, all ranks 2(n-1)*S exactly", "[ch04]") {
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
// The chapter's own demos (explain, check, measure) shrunk to a minimum.
const char* kQuickDemos = "--no-explain --max-bytes 4096 --reps 1 --check-size 100";
}  // namespace

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
