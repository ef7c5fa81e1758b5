// test_ch07_layers.cpp — chapter 07's stage 3 layers: gather_layer against
// every shard (on the ring, charged to comm buffers), release_layer giving the
// bytes back, and layer_parameters/layer_done: a view at stages 0-2, gathered
// for the use and let go after at stage 3.
#include "support/catch.h"
#include <string>
#include <vector>

#include "ch07.h"
#include "dpt/memory_ledger.h"
#include "support/ch07_ranks.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch07;
using dpt_test::clear_traffic;
using dpt_test::on_device;
using dpt_test::state_for;

// ----------------------------------------------------------------------------
// layer_parameters, layer_done, gather_layer, release_layer

TEST_CASE("gather_layer: the layer's full parameters from every shard, on the ring, charged to comm buffers",
          "[ch07][needs:partition_parameters][needs:shard_bounds]") {
  for (int world : {1, 2, 4}) {
    INFO(world << " ranks");
    dpt_test::RankChecks checks;
    dpt_test::run_ranks(world, [&](Context& ctx) {
      Partition part = dpt_test::ceil_partition(45, world);
      auto global = [](int64_t x) { return float(x) * 0.5f - 7.0f; };  // what the whole buffer holds
      std::vector<float> values;
      for (int64_t i = 0; i < part.shard; ++i) values.push_back(global(ctx.rank * part.shard + i));
      Tensor shard = on_device(ctx, values);
      for (Range layer : {Range{0, 45}, Range{3, 30}, Range{44, 45}}) {
        std::size_t comm_before = ctx.device.ledger().current(MemoryCategory::Comm);
        clear_traffic(ctx);
        Tensor full = gather_layer(ctx.comm, part, layer, shard, ctx.device);
        RANK_CHECK(checks, ctx, full.numel() == layer.size());
        std::vector<float> got = full.to_vector();
        for (int64_t i = 0; i < layer.size() && i < int64_t(got.size()); ++i)
          if (got[std::size_t(i)] != global(layer.begin + i))
            checks.check(false, "rank " + std::to_string(ctx.rank) + ": gathered float " + std::to_string(i) +
                                    " is not flat element " + std::to_string(layer.begin + i) + " of the parameters");
        if (ctx.device.ledger().current(MemoryCategory::Comm) != comm_before + std::size_t(4 * layer.size()))
          checks.check(false, "rank " + std::to_string(ctx.rank) + ": the gathered layer must be charged to comm "
                                  "buffers (allocate it inside a MemoryScope)");
        ctx.comm.barrier();
        const TrafficLog& log = ctx.comm.traffic();
        RANK_CHECK(checks, ctx, log.bytes(ctx.rank, (ctx.rank + 1) % world) == log.bytes_sent(ctx.rank));  // a ring
        int64_t total = 0;
        for (int r = 0; r < world; ++r) total += log.bytes_sent(r);
        RANK_CHECK(checks, ctx, total == 4 * layer.size() * (world - 1));  // every part reaches N−1 other ranks once
        ctx.comm.barrier();
      }
    });
    INFO(checks.text());
    CHECK(checks.failed.empty());
  }
}

TEST_CASE("release_layer: a released layer is undefined and its bytes are back with the device", "[ch07]") {
  Device& device = Device::cpu(7);
  const std::size_t before = device.current_bytes();
  Tensor gathered;
  {
    MemoryScope scope(MemoryCategory::Comm);
    gathered = Tensor::zeros({1000}, device);
  }
  release_layer(gathered);
  INFO("a gathered layer kept after release_layer holds " << device.current_bytes() - before
                                                         << " bytes: at stage 3 every layer would stay gathered");
  CHECK(!gathered.defined());
  CHECK(device.current_bytes() == before);
}

TEST_CASE("layer_parameters, layer_done: a view at stages 0-2, and at stage 3 gathered for the use and let go after",
          "[ch07][hole:layer_parameters][hole:layer_done]"
          "[needs:partition_parameters][needs:shard_bounds][needs:gather_layer][needs:release_layer]") {
  for (int stage = 0; stage <= 3; ++stage)
    for (int world : {1, 3}) {
      INFO("stage " << stage << ", " << world << " ranks");
      dpt_test::RankChecks checks;
      dpt_test::run_ranks(world, [&](Context& ctx) {
        const int r = ctx.rank;
        Partition part = dpt_test::ceil_partition(40, world);
        ZeroState s = state_for(ctx, part, stage, {Range{0, 12}, Range{12, 33}, Range{33, 40}});
        std::vector<float> values;
        for (int64_t i = 0; i < s.params.numel(); ++i) values.push_back(float(stage <= 2 ? i : r * part.shard + i) + 0.5f);
        s.params = on_device(ctx, values);
        for (int l = 0; l < 3; ++l) {
          const Range& range = s.layers[std::size_t(l)];
          const std::size_t comm_before = ctx.device.ledger().current(MemoryCategory::Comm);
          clear_traffic(ctx);
          Tensor w = layer_parameters(s, l);
          std::vector<float> got = w.defined() ? w.to_vector() : std::vector<float>{};
          bool right = int64_t(got.size()) == range.size();
          for (std::size_t i = 0; right && i < got.size(); ++i) right = got[i] == float(range.begin + int64_t(i)) + 0.5f;
          if (!right)
            checks.check(false, "rank " + std::to_string(r) + ": layer " + std::to_string(l) + "'s parameters are not "
                                    "flat elements [" + std::to_string(range.begin) + ", " + std::to_string(range.end) + ")");
          ctx.comm.barrier();
          const int64_t sent = ctx.comm.traffic().bytes_sent(r);
          const std::size_t comm_in_use = ctx.device.ledger().current(MemoryCategory::Comm) - comm_before;
          if (stage <= 2 && (sent != 0 || comm_in_use != 0))
            checks.check(false, "rank " + std::to_string(r) + ": at stage " + std::to_string(stage) +
                                    " every rank holds the parameters: nothing to send or allocate (sent " +
                                    std::to_string(sent) + " bytes, " + std::to_string(comm_in_use) + " bytes of comm buffers)");
          if (stage == 3 && !s.gathered[std::size_t(l)].defined())
            checks.check(false, "rank " + std::to_string(r) + ": at stage 3 s.gathered[l] must hold the layer while it is in use");
          w = Tensor();
          layer_done(s, l);
          const std::size_t kept = ctx.device.ledger().current(MemoryCategory::Comm) - comm_before;
          if (kept != 0)
            checks.check(false, "rank " + std::to_string(r) + ": after layer_done(" + std::to_string(l) + ") " +
                                    std::to_string(kept) + " bytes of comm buffers are still held: a layer kept "
                                    "gathered after its use (stage 3 must let it go)");
        }
        if (stage == 3) {  // a layer gathered ahead (--prefetch) is used as it is: no second gather
          s.gathered[1] = gather_layer(ctx.comm, part, s.layers[1], s.params, ctx.device);
          clear_traffic(ctx);
          Tensor w = layer_parameters(s, 1);
          ctx.comm.barrier();
          if (ctx.comm.traffic().bytes_sent(r) != 0)
            checks.check(false, "rank " + std::to_string(r) + ": layer 1 was gathered ahead, yet layer_parameters "
                                    "gathered it again");
          w = Tensor();
          layer_done(s, 1);
          ctx.comm.barrier();
        }
      });
      INFO(checks.text());
      CHECK(checks.failed.empty());
    }
}
