// test_ch07_layers.cpp — chapter 07's use_layer (the life of a layer's
// parameters around one use), one test case per property: `use` sees the
// layer's parameters; a stage that keeps them spends nothing on them; stage 3
// brings them over the ring into comm buffers; after the use nothing of them
// is held; a layer gathered ahead (--prefetch) is used as it is. Oracles: the
// flat values written by hand, the traffic log, the device's memory ledger.
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
// use_layer

namespace {
const std::vector<Range> kLayers = {Range{0, 12}, Range{12, 33}, Range{33, 40}};  // Ψ = 40, straddling shards
float flat_value(int64_t x) { return float(x) + 0.5f; }                         // parameter x of the flat buffer

// A rank's ZeroState at `stage` holding flat_value in what it keeps.
ZeroState filled_state(Context& ctx, int stage) {
  Partition part = dpt_test::ceil_partition(40, ctx.world);
  ZeroState s = state_for(ctx, part, stage, kLayers);
  std::vector<float> values;
  for (int64_t i = 0; i < s.params.numel(); ++i) values.push_back(flat_value(stage <= 2 ? i : ctx.rank * part.shard + i));
  s.params = on_device(ctx, values);
  return s;
}

// Layer l's full parameters as a gather ahead of its use would leave them, charged to comm buffers.
Tensor gathered_ahead(Context& ctx, int l) {
  std::vector<float> values;
  for (int64_t x = kLayers[std::size_t(l)].begin; x < kLayers[std::size_t(l)].end; ++x) values.push_back(flat_value(x));
  MemoryScope scope(MemoryCategory::Comm);
  return on_device(ctx, values);
}

std::string where(const Context& ctx, int stage, int l) {
  return "rank " + std::to_string(ctx.rank) + " of " + std::to_string(ctx.world) + ", stage " + std::to_string(stage) +
         ", layer " + std::to_string(l) + ": ";
}

// Runs `body` on 1 and 3 ranks for each of `stages`, after checking that
// shard_bounds (which use_layer needs) is right on these layers.
template <typename Body>
void for_each_world(std::vector<int> stages, Body body) {
  for (int world : {1, 3})
    for (Range layer : kLayers) dpt_test::require_shard_bounds(dpt_test::ceil_partition(40, world), layer);
  for (int stage : stages)
    for (int world : {1, 3}) {
      dpt_test::RankChecks checks;
      dpt_test::run_ranks(world, [&](Context& ctx) { body(ctx, stage, checks); });
      INFO(checks.text());
      CHECK(checks.failed.empty());
    }
}
std::size_t comm_bytes(const Context& ctx) { return ctx.device.ledger().current(MemoryCategory::Comm); }
}  // namespace

TEST_CASE("use_layer: `use` runs once, with the layer's full parameters (weight then bias), at every stage",
          "[ch07][needs:shard_bounds]") {
  for_each_world({0, 1, 2, 3}, [](Context& ctx, int stage, dpt_test::RankChecks& checks) {
    ZeroState s = filled_state(ctx, stage);
    for (int l = 0; l < 3; ++l) {
      const Range& range = kLayers[std::size_t(l)];
      int calls = 0;
      std::vector<float> got;
      bool defined = true;
      use_layer(s, l, [&](const Tensor& w) {
        ++calls;
        defined = w.defined();
        if (defined) got = w.to_vector();
      });
      if (calls != 1)
        checks.check(false, where(ctx, stage, l) + "`use` ran " + std::to_string(calls) + " times; once per call");
      if (!defined) {
        checks.check(false, where(ctx, stage, l) + "`use` got an undefined tensor: the parameters were let go "
                                                   "before their use");
        continue;
      }
      if (int64_t(got.size()) != range.size()) {
        checks.check(false, where(ctx, stage, l) + "`use` got " + std::to_string(got.size()) + " floats; the layer has " +
                                std::to_string(range.size()) + " (flat elements [" + std::to_string(range.begin) +
                                ", " + std::to_string(range.end) + "))");
        continue;
      }
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != flat_value(range.begin + int64_t(i))) {
          checks.check(false, where(ctx, stage, l) + "float " + std::to_string(i) + " that `use` got is " +
                                  std::to_string(got[i]) + ", flat parameter " + std::to_string(range.begin + int64_t(i)) +
                                  " is " + std::to_string(flat_value(range.begin + int64_t(i))) +
                                  (stage == 3 ? " (which rank owns it, and where in its shard?)" : ""));
          break;
        }
    }
  });
}

TEST_CASE("use_layer: a rank that keeps the layer's parameters sends nothing and allocates nothing (stages 0-2)",
          "[ch07][needs:shard_bounds]") {
  for_each_world({0, 1, 2}, [](Context& ctx, int stage, dpt_test::RankChecks& checks) {
    ZeroState s = filled_state(ctx, stage);
    for (int l = 0; l < 3; ++l) {
      const std::size_t before = comm_bytes(ctx);
      std::size_t during = before;
      clear_traffic(ctx);
      use_layer(s, l, [&](const Tensor&) { during = comm_bytes(ctx); });
      ctx.comm.barrier();
      const int64_t sent = ctx.comm.traffic().bytes_sent(ctx.rank);
      if (sent != 0 || during != before)
        checks.check(false, where(ctx, stage, l) + "sent " + std::to_string(sent) + " bytes and held " +
                                std::to_string(during - before) + " bytes of comm buffers during the use; at stage " +
                                std::to_string(stage) + " every rank keeps every parameter, so a use costs nothing");
      ctx.comm.barrier();
    }
  });
}

TEST_CASE("use_layer: at stage 3 the parameters come over the ring, each rank's part to each other rank once, in "
          "comm buffers",
          "[ch07][needs:shard_bounds]") {
  for_each_world({3}, [](Context& ctx, int stage, dpt_test::RankChecks& checks) {
    ZeroState s = filled_state(ctx, stage);
    const int world = ctx.world;
    for (int l = 0; l < 3; ++l) {
      const Range& range = kLayers[std::size_t(l)];
      const std::size_t before = comm_bytes(ctx);
      std::size_t during = before;
      clear_traffic(ctx);
      use_layer(s, l, [&](const Tensor&) { during = comm_bytes(ctx); });
      ctx.comm.barrier();
      const TrafficLog& log = ctx.comm.traffic();
      if (during < before + std::size_t(4 * range.size()))
        checks.check(false, where(ctx, stage, l) + "while `use` ran, the device's ledger held " +
                                std::to_string(during - before) + " more bytes in MemoryCategory::Comm than before; "
                                "at stage 3, on any number of ranks (1 included), the layer's full " +
                                std::to_string(4 * range.size()) + " bytes must be held there during the use. "
                                "Either the parameters `use` got are not in memory of their own for this use, or "
                                "that memory was charged to another category");
      if (log.bytes(ctx.rank, (ctx.rank + 1) % world) != log.bytes_sent(ctx.rank))
        checks.check(false, where(ctx, stage, l) + "sent " + std::to_string(log.bytes_sent(ctx.rank)) +
                                " bytes, not all to its right neighbour: the parameters travel on ch07's ring");
      int64_t total = 0;
      for (int r = 0; r < world; ++r) total += log.bytes_sent(r);
      if (ctx.rank == 0 && total != 4 * range.size() * (world - 1))
        checks.check(false, where(ctx, stage, l) + "all ranks sent " + std::to_string(total) + " bytes; each rank's "
                                "part must reach each of the N-1 others once: 4 bytes x " + std::to_string(range.size()) +
                                " floats x " + std::to_string(world - 1) + " = " +
                                std::to_string(4 * range.size() * (world - 1)));
      ctx.comm.barrier();
    }
  });
}

TEST_CASE("use_layer: after the use nothing of the layer is held, and its slot s.gathered[l] is undefined",
          "[ch07][needs:shard_bounds]") {
  for_each_world({0, 1, 2, 3}, [](Context& ctx, int stage, dpt_test::RankChecks& checks) {
    ZeroState s = filled_state(ctx, stage);
    for (int l = 0; l < 3; ++l) {
      const std::size_t before = comm_bytes(ctx);
      use_layer(s, l, [](const Tensor&) {});
      const std::size_t after = comm_bytes(ctx);
      if (after != before)
        checks.check(false, where(ctx, stage, l) + std::to_string(after - before) + " bytes of comm buffers are still "
                                "held after the use: the layer stays gathered (at stage 3 every layer would, a full "
                                "copy of the parameters)");
      if (s.gathered[std::size_t(l)].defined())
        checks.check(false, where(ctx, stage, l) + "s.gathered[" + std::to_string(l) + "] is still defined after the "
                                "use: the next use would take it for a gather ahead, stale after the update");
    }
  });
}

TEST_CASE("use_layer: a layer gathered ahead (--prefetch) is used as it is, and other layers' slots are left alone",
          "[ch07][needs:shard_bounds]") {
  for_each_world({3}, [](Context& ctx, int stage, dpt_test::RankChecks& checks) {
    ZeroState s = filled_state(ctx, stage);
    s.gathered[1] = gathered_ahead(ctx, 1);
    s.gathered[2] = gathered_ahead(ctx, 2);
    clear_traffic(ctx);
    std::vector<float> got;
    use_layer(s, 1, [&](const Tensor& w) { got = w.defined() ? w.to_vector() : std::vector<float>{}; });
    ctx.comm.barrier();
    if (ctx.comm.traffic().bytes_sent(ctx.rank) != 0)
      checks.check(false, where(ctx, stage, 1) + "was gathered ahead, yet use_layer sent " +
                              std::to_string(ctx.comm.traffic().bytes_sent(ctx.rank)) +
                              " bytes: it gathered it again (or let the slot go before the use)");
    if (got != gathered_ahead(ctx, 1).to_vector())
      checks.check(false, where(ctx, stage, 1) + "`use` did not get the parameters gathered ahead in s.gathered[1]");
    if (s.gathered[1].defined())
      checks.check(false, where(ctx, stage, 1) + "s.gathered[1] is still defined after its use: let it go");
    use_layer(s, 0, [](const Tensor&) {});
    if (!s.gathered[2].defined())
      checks.check(false, where(ctx, stage, 0) + "the use of layer 0 or 1 let go of s.gathered[2], gathered ahead for "
                              "layer 2's own use: a use lets go of its own layer only");
    ctx.comm.barrier();
  });
}
