// test_data_parallel.cpp — the core's data-parallel pieces: the slowest-rank
// timer (chapter 04's timing table and bench_allreduce share it), strided
// sharding, replicas from the master copy, replica spread, flatten/unflatten
// (to a host vector and to a tensor on a device), and the ring-traffic
// verdicts (against hand-written traffic matrices).
#include "support/catch.h"
#include <array>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "dpt/timing.h"
#include "support/ranks.h"

using namespace dpt;

TEST_CASE("time_window: every rank reports the slowest rank's time", "[core]") {
  // Rank 1 sleeps 50 ms per call, the others return at once: a timer that
  // kept each rank's own time would report ~0 on rank 0.
  std::mutex mutex;
  std::vector<double> seen(3);
  dpt_test::run_ranks(3, [&](Context& ctx) {
    double t = time_window(ctx.comm, [&] {
      if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }, 2);
    std::lock_guard<std::mutex> lock(mutex);
    seen[ctx.rank] = t;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(seen[r] >= 0.049);  // per call; sleep_for never returns early
    CHECK(seen[r] == seen[0]);
  }
}

TEST_CASE("max_over_ranks: the largest value, and NaN when any rank has NaN", "[core]") {
  std::vector<double> got(4), with_nan(4);
  std::mutex mutex;
  dpt_test::run_ranks(4, [&](Context& ctx) {
    double a = max_over_ranks(ctx.comm, ctx.rank == 2 ? 7.5 : double(ctx.rank));
    double b = max_over_ranks(ctx.comm, ctx.rank == 3 ? std::nan("") : 1.0);
    std::lock_guard<std::mutex> lock(mutex);
    got[ctx.rank] = a;
    with_nan[ctx.rank] = b;
  });
  for (int r = 0; r < 4; ++r) {
    CHECK(got[r] == 7.5);
    CHECK(std::isnan(with_nan[r]));
  }
  CHECK(median({3, 1, 2}) == 2);
}

TEST_CASE("strided_shard: equal shards that cover the global batch once, a remainder is an error", "[core]") {
  std::vector<int64_t> global = {10, 11, 12, 13, 14, 15};
  CHECK(strided_shard(global, 1, 3) == std::vector<int64_t>{11, 14});
  std::multiset<int64_t> seen;
  for (int r = 0; r < 3; ++r)
    for (int64_t i : strided_shard(global, r, 3)) seen.insert(i);
  CHECK(seen == std::multiset<int64_t>(global.begin(), global.end()));
  CHECK_THROWS_AS(strided_shard(global, 0, 4), Error);
}

TEST_CASE("make_replica: every replica equals the master copy built on rank 0, replica_spread sees any apart", "[core]") {
  Options o;
  o.model = "8-5-3";
  std::mutex mutex;
  std::vector<double> from_master(3), spread(3), apart(3), nan(3);
  dpt_test::run_ranks(3, [&](Context& ctx) {
    MLP replica = make_replica(ctx, o);
    MLP master = build_model(o, Device::host());  // what rank 0's master copy is
    double d = max_weight_difference(master, replica);
    double s = replica_spread(ctx, replica);
    // replica_spread sees one replica apart, and a NaN.
    Tensor w = replica.parameters()[0];
    if (ctx.rank == 2) w.data()[3] += 0.25f;
    double a = replica_spread(ctx, replica);
    if (ctx.rank == 1) w.data()[0] = std::nanf("");
    double b = replica_spread(ctx, replica);
    std::lock_guard<std::mutex> lock(mutex);
    from_master[ctx.rank] = d;
    spread[ctx.rank] = s;
    apart[ctx.rank] = a;
    nan[ctx.rank] = b;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(from_master[r] == 0);  // a missing broadcast or one from rank 1 leaves rank 1 or 2 apart
    CHECK(spread[r] == 0);
    CHECK(apart[r] == Approx(0.25).epsilon(1e-6));
    CHECK(std::isnan(nan[r]));
  }
}

TEST_CASE("flatten and unflatten: a round trip in parameter order, sizes must add up", "[core]") {
  std::vector<Tensor> ts = {Tensor::from_vector({2, 2}, {1, 2, 3, 4}, Device::host()),
                            Tensor::from_vector({3}, {5, 6, 7}, Device::host())};
  std::vector<float> flat = flatten(ts);
  CHECK(flat == std::vector<float>{1, 2, 3, 4, 5, 6, 7});
  for (float& v : flat) v *= -1;
  unflatten(flat, ts);
  CHECK(ts[1].to_vector() == std::vector<float>{-5, -6, -7});
  flat.pop_back();
  CHECK_THROWS_AS(unflatten(flat, ts), Error);
}

TEST_CASE("flatten_on, flatten_into, unflatten(Tensor): the host versions' floats, on a device, as comm buffers",
          "[core]") {
  // Oracle: the values written out by hand (and the host flatten, pinned above).
  std::vector<Tensor> ts = {Tensor::from_vector({2, 2}, {1, 2, 3, 4}, Device::cpu(6)),
                            Tensor::from_vector({3}, {5, 6, 7}, Device::host()),
                            Tensor::zeros({0}, Device::cpu(6))};
  Device& device = Device::cpu(7);
  std::size_t comm_before = device.ledger().current(MemoryCategory::Comm);
  Tensor flat = flatten_on(ts, device);
  CHECK(&flat.device() == &device);
  CHECK(flat.shape() == Shape{7});
  CHECK(flat.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6, 7});
  CHECK(flat.to_vector() == flatten(ts));
  CHECK(device.ledger().current(MemoryCategory::Comm) - comm_before >= 7 * sizeof(float));

  for (int64_t i = 0; i < 7; ++i) flat.data()[i] = -10.0f * float(i + 1);
  unflatten(flat, ts);
  CHECK(ts[0].to_vector() == std::vector<float>{-10, -20, -30, -40});
  CHECK(ts[1].to_vector() == std::vector<float>{-50, -60, -70});

  Tensor into = Tensor::full({7}, 99.0f, Device::cpu(6));
  flatten_into(ts, into);
  CHECK(into.to_vector() == std::vector<float>{-10, -20, -30, -40, -50, -60, -70});
  CHECK(flatten_on({}, device).numel() == 0);

  Tensor short_one = Tensor::zeros({6}, device);
  CHECK_THROWS_WITH(unflatten(short_one, ts), contains_text("unflatten: 6 floats for tensors of 7"));
  CHECK_THROWS_WITH(flatten_into(ts, short_one), contains_text("tensors of 7 floats into a flat tensor of 6"));
}

namespace {
// A 3-rank traffic log with the given sends (src, dst, bytes), as the
// communicator would record them; and the verdicts a ring check draws from it.
Verdicts ring_verdicts(const std::vector<std::array<int64_t, 3>>& sends, double bytes_per_call) {
  TrafficLog log(3);
  for (auto& [src, dst, bytes] : sends) log.view(int(src)).record_send(int(dst), bytes);
  Verdicts v;
  add_ring_traffic_verdicts(v, log, bytes_per_call, 1, "x");
  return v;
}
std::string all_text(const Verdicts& v) {
  std::ostringstream out;
  v.print(out);
  return out.str();
}
}  // namespace

TEST_CASE("ring traffic verdicts: 'only to its right neighbour' appears only when the matrix shows it", "[core]") {
  // A ring of S = 300 bytes on 3 ranks: each rank sends 2(n-1)/n*S = 400 bytes right.
  Verdicts ring = ring_verdicts({{0, 1, 400}, {1, 2, 400}, {2, 0, 400}}, 300);
  CHECK(ring.all_passed());
  CHECK_THAT(all_text(ring), contains_text("x: each rank sends only to its right neighbour"));

  Verdicts leftward = ring_verdicts({{0, 2, 400}, {1, 0, 400}, {2, 1, 400}}, 300);
  CHECK(leftward.failures() == 1);  // the bytes are right, the direction is not
  CHECK_THAT(all_text(leftward), contains_text("rank 1 sent 400 B to rank 0 (its left neighbour)"));
  CHECK(all_text(leftward).find("only to its right") == std::string::npos);

  // Naive through rank 0 on 4 ranks would list sends from and to rank 0; on 3,
  // rank 0 sending to 2 and 2 to 0 plus 1 to 0 is all through rank 0.
  Verdicts hub = ring_verdicts({{1, 0, 300}, {2, 0, 300}, {0, 1, 300}, {0, 2, 300}}, 300);
  CHECK(hub.failures() == 2);
  CHECK_THAT(all_text(hub), contains_text("everything went through rank 0"));
  CHECK(all_text(hub).find("only to its right") == std::string::npos);

  Verdicts too_many = ring_verdicts({{0, 1, 800}, {1, 2, 400}, {2, 0, 400}}, 300);
  CHECK(too_many.failures() == 1);  // 400 bytes over, tolerance 8(n-1) = 16
}
