// test_ch07.cpp — chapter 07's holes against oracles that share none of their
// code (hand-written golden partitions, an element-by-element owner count,
// serial sums, the library's reduce-scatter, the traffic log, the device's
// ledger), then the chapter: every stage gives stage 0's weights bit for bit
// (threads, mpirun -np 2 and 4) and stage 0 gives one device's; memory per
// rank follows the ZeRO formulas; bytes per step follow theory; a capped
// device fails at stage 0 and trains at stage 3.
#include "support/catch.h"
#include <sstream>
#include <iomanip>
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "ch07.h"
#include "dpt/checkpoint.h"
#include "dpt/memory_ledger.h"
#include "dpt/data_parallel.h"
#include "dpt/floats.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/step_check.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "zero_checkpoint.h"
#include "zero_engine.h"

using namespace dpt;

namespace dpt_test {
/// Catch2's assertions are not thread-safe: rank threads record what failed
/// here (RANK_CHECK), and the test thread asserts on the list after run_ranks.
struct RankChecks {
  std::mutex mutex;
  std::vector<std::string> failed;  ///< "rank r: expression", in the order seen
  void check(bool ok, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lock(mutex);
    failed.push_back(what);
  }
  std::string text() const {
    std::string all;
    for (const std::string& f : failed) all += f + "\n";
    return all;
  }
};
}  // namespace dpt_test

/// Records `cond` on `checks` from a rank thread, naming the rank and the expression.
#define RANK_CHECK(checks, ctx, cond) (checks).check(bool(cond), "rank " + std::to_string((ctx).rank) + ": " #cond)

using namespace dpt::ch07;

// ----------------------------------------------------------------------------
// partition_parameters, shard_bounds

TEST_CASE("partition_parameters: equal shards that own every parameter, padded least", "[ch07]") {
  struct Golden { int64_t psi; int world; int64_t shard, padded; };
  for (Golden g : {Golden{559, 4, 140, 560}, Golden{559, 3, 187, 561}, Golden{8, 4, 2, 8}, Golden{1, 3, 1, 3},
                   Golden{7, 1, 7, 7}, Golden{216586, 4, 54147, 216588}}) {
    Partition p = partition_parameters(g.psi, g.world);
    INFO("Ψ = " << g.psi << ", N = " << g.world << ": got S = " << p.shard << ", N·S = " << p.padded);
    CHECK(p.psi == g.psi);
    CHECK(p.world == g.world);
    if (p.shard * g.world < g.psi)
      FAIL("N·S < Ψ: the last " << g.psi - p.shard * g.world << " parameters belong to no shard (S must round up)");
    CHECK(p.shard == g.shard);  // the least S with N·S >= Ψ
    CHECK(p.padded == g.padded);
  }
  // The spec: a bad value is an error naming it.
  CHECK_THROWS_WITH(partition_parameters(-5, 4), contains_text("-5"));
  CHECK_THROWS_WITH(partition_parameters(10, -3), contains_text("-3"));
  CHECK_THROWS(partition_parameters(0, 4));
  CHECK_THROWS(partition_parameters(10, 0));
}

TEST_CASE("shard_bounds: golden ranges and an element-by-element owner count", "[ch07][needs:partition_parameters]") {
  Partition p{10, 3, 4, 12};  // written by hand, not by partition_parameters
  CHECK(shard_bounds(p, {0, 12}) == std::vector<int64_t>{0, 4, 8, 12});
  CHECK(shard_bounds(p, {3, 9}) == std::vector<int64_t>{0, 1, 5, 6});   // 3 ∈ rank 0, 4..7 rank 1, 8 rank 2
  CHECK(shard_bounds(p, {5, 6}) == std::vector<int64_t>{0, 0, 1, 1});   // a one-float range: rank 1 alone
  CHECK(shard_bounds(p, {12, 12}) == std::vector<int64_t>{0, 0, 0, 0});
  CHECK_THROWS(shard_bounds(p, {4, 13}));
  CHECK_THROWS(shard_bounds(p, {-1, 3}));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int world = 1 + int(rng() % 6);
    Partition part = partition_parameters(1 + int64_t(rng() % 200), world);
    int64_t a = int64_t(rng() % std::size_t(part.padded + 1)), b = int64_t(rng() % std::size_t(part.padded + 1));
    Range range{std::min(a, b), std::max(a, b)};
    std::vector<int64_t> bounds = shard_bounds(part, range);
    REQUIRE(bounds.size() == std::size_t(world + 1));
    std::vector<int64_t> owned(std::size_t(world), 0);  // the oracle: who owns each element, by division
    for (int64_t x = range.begin; x < range.end; ++x) ++owned[std::size_t(x / part.shard)];
    INFO("trial " << trial << " N " << world << " S " << part.shard << " range " << range.begin << ".." << range.end
                  << ": rank r's count b[r+1] - b[r] must be the number of the range's elements in its shard");
    CHECK(bounds.front() == 0);
    for (int r = 0; r < world; ++r) CHECK(bounds[std::size_t(r) + 1] - bounds[std::size_t(r)] == owned[std::size_t(r)]);
  }
}

// ----------------------------------------------------------------------------
// the stages: on_bucket_ready, update_parameters

namespace {
// Rank r's gradient of flat element x: distinct per rank and element, exact in float.
// A float with every digit that tells two floats apart.
std::string digits9(float value) {
  std::ostringstream out;
  out << std::setprecision(9) << value;
  return out.str();
}

float grad_value(int rank, int64_t x) { return float((x * 7 + rank * 13) % 101) / 8.0f - 3.0f; }
constexpr float kUntouched = -99.0f;  // what a float no hole should write holds

Tensor on_device(Context& ctx, const std::vector<float>& values) {
  return Tensor::from_vector({int64_t(values.size())}, values, ctx.device);
}

// What each stage keeps, written out here (the oracle; the trainer allocates the same).
ZeroState state_for(Context& ctx, const Partition& part, int stage, std::vector<Range> layers = {}) {
  ZeroState s{ctx.comm, ctx.device};
  s.part = part, s.stage = stage, s.layers = layers;
  const int64_t P = part.padded, S = part.shard;
  s.params = Tensor::zeros({stage <= 2 ? P : S}, ctx.device);
  s.grads = Tensor::zeros({stage <= 1 ? P : S}, ctx.device);
  s.m = Tensor::zeros({stage == 0 ? P : S}, ctx.device);
  s.v = Tensor::zeros({stage == 0 ? P : S}, ctx.device);
  s.gathered.resize(layers.size());
  return s;
}

void clear_traffic(Context& ctx) {
  ctx.comm.barrier();
  ctx.comm.traffic().clear();
  ctx.comm.barrier();
}
}  // namespace

TEST_CASE("on_bucket_ready: each stage leaves the mean where it keeps gradients, and sends no more than it needs",
          "[ch07][needs:partition_parameters][needs:shard_bounds]") {
  for (int stage = 0; stage <= 3; ++stage)
    for (int world : {1, 2, 3, 4}) {
      Partition part{23, world, (23 + world - 1) / world, 0};
      part.padded = part.shard * world;
      for (Range range : {Range{0, 23}, Range{5, 17}, Range{20, 23}}) {
        INFO("stage " << stage << ", " << world << " ranks, bucket [" << range.begin << ", " << range.end << ")");
        dpt_test::RankChecks checks;
        dpt_test::run_ranks(world, [&](Context& ctx) {
          const int r = ctx.rank;
          const int64_t S = part.shard, P = part.padded;
          ZeroState s = state_for(ctx, part, stage);
          std::vector<float> values, grads(std::size_t(stage <= 1 ? P : S), kUntouched);
          for (int64_t x = range.begin; x < range.end; ++x) values.push_back(grad_value(r, x));
          Tensor bucket;
          if (stage <= 1) {  // the bucket is a view of the full gradient buffer
            std::copy(values.begin(), values.end(), grads.begin() + range.begin);
            s.grads = on_device(ctx, grads);
            bucket = s.grads.slice(range.begin, range.size());
          } else {
            s.grads = on_device(ctx, grads);
            bucket = on_device(ctx, values);
          }
          clear_traffic(ctx);
          on_bucket_ready(s, range, bucket);
          ctx.comm.barrier();
          std::vector<float> got = s.grads.to_vector();
          int64_t own = 0;
          for (int64_t i = 0; i < int64_t(got.size()); ++i) {
            const int64_t x = stage <= 1 ? i : r * S + i;  // the flat element float i of s.grads holds
            const bool in_range = x >= range.begin && x < range.end, ours = x / S == r;
            double sum = 0;  // the oracle: a serial sum over ranks
            for (int q = 0; q < world; ++q) sum += grad_value(q, x);
            // Eighths add exactly in any order, so the contract's "sum divided by
            // float(N)" has exactly one right answer: dividing first (each rank's
            // value by N, then the sum) rounds N times and, at N = 3, misses it.
            const float mean = float(sum) / float(world), seen = got[std::size_t(i)];
            own += in_range && ours;
            if (!in_range) {
              if (seen != kUntouched)
                checks.check(false, "rank " + std::to_string(r) + ": gradient float " + std::to_string(i) + " (flat " +
                                        std::to_string(x) + ") changed although it is outside the bucket: a part "
                                        "must land at its own flat place");
            } else if ((stage == 0 || ours) && seen != mean) {
              std::string why = std::fabs(seen - float(sum)) <= 1e-5f ? " (the sum: divide by N)"
                                : std::fabs(seen - mean) <= 1e-5f
                                    ? " (off in the last bits: the mean is the sum divided by N once, not each "
                                      "rank's values divided first)"
                                    : "";
              checks.check(false, "rank " + std::to_string(r) + ": gradient of flat " + std::to_string(x) + " is " +
                                      digits9(seen) + ", the mean over ranks is " + digits9(mean) + why +
                                      (stage == 0 ? "; at stage 0 every rank needs every mean"
                                                  : "; this rank owns it, so it must hold the mean"));
            }
          }
          if (stage >= 2 && bucket.defined())
            checks.check(false, "rank " + std::to_string(r) + ": at stage " + std::to_string(stage) +
                                    " the bucket is still held after on_bucket_ready: nothing of it may be kept");
          ctx.comm.barrier();
          const TrafficLog& log = ctx.comm.traffic();
          const int64_t sent = log.bytes_sent(r), needed = 4 * (range.size() - own);
          RANK_CHECK(checks, ctx, log.bytes(r, (r + 1) % world) == sent);  // the ring: to the right neighbour only
          if (stage >= 1 && world > 1 && sent != needed)
            checks.check(false, "rank " + std::to_string(r) + " sent " + std::to_string(sent) + " bytes; a reduce-"
                                    "scatter of the bucket needs " + std::to_string(needed) + " (all of it but its "
                                    "own part): from stage 1 on no rank needs the other ranks' means");
          ctx.comm.barrier();
        });
        INFO(checks.text());
        CHECK(checks.failed.empty());
      }
    }
}

namespace {
// The oracle for one parameter: Adam's step t, written out from the paper (AdamW when decoupled).
struct AdamOracle {
  AdamConfig c;
  void step(int64_t t, double& p, double& m, double& v, double g) const {
    if (c.decoupled) p *= 1.0 - double(c.lr) * c.weight_decay;
    else g += double(c.weight_decay) * p;
    m = c.beta1 * m + (1.0 - c.beta1) * g;
    v = c.beta2 * v + (1.0 - c.beta2) * g * g;
    double m_hat = m / (1.0 - std::pow(double(c.beta1), double(t))), v_hat = v / (1.0 - std::pow(double(c.beta2), double(t)));
    p -= c.lr * m_hat / (std::sqrt(v_hat) + c.eps);
  }
};
double param_at(int64_t x) { return x < 29 ? 0.25 * double(x % 9) - 1.0 : 0.0; }  // 29 parameters, then padding
double grad_at(int64_t x) { return x < 29 ? 0.125 * double(x % 7) - 0.3 : 0.0; }
double m_at(int64_t x) { return x < 29 ? 0.01 * double(x % 5) : 0.0; }
double v_at(int64_t x) { return x < 29 ? 0.001 * double(1 + x % 4) : 0.0; }
}  // namespace

TEST_CASE("update_parameters: every parameter steps once, and every rank holds what its stage keeps, updated",
          "[ch07][needs:partition_parameters][needs:shard_bounds]") {
  const int64_t t = 3;
  AdamOracle adam;
  adam.c.lr = 0.01f, adam.c.weight_decay = 0.05f, adam.c.decoupled = true;
  for (int stage = 0; stage <= 3; ++stage)
    for (int world : {1, 2, 3}) {
      INFO("stage " << stage << ", " << world << " ranks");
      dpt_test::RankChecks checks;
      dpt_test::run_ranks(world, [&](Context& ctx) {
        const int r = ctx.rank;
        Partition part{29, world, (29 + world - 1) / world, 0};
        part.padded = part.shard * world;
        const int64_t S = part.shard, P = part.padded;
        ZeroState s = state_for(ctx, part, stage);
        s.adam = adam.c;
        // Each buffer holds the global values where the stage keeps it (full: all of it, a shard: rank r's S).
        auto fill = [&](bool full, double (*at)(int64_t)) {
          std::vector<float> values;
          for (int64_t i = 0; i < (full ? P : S); ++i) values.push_back(float(at(full ? i : r * S + i)));
          return on_device(ctx, values);
        };
        s.params = fill(stage <= 2, param_at);
        s.grads = fill(stage <= 1, grad_at);
        s.m = fill(stage == 0, m_at);
        s.v = fill(stage == 0, v_at);
        clear_traffic(ctx);
        update_parameters(s, t);
        ctx.comm.barrier();
        std::vector<float> p = s.params.to_vector(), m = s.m.to_vector(), v = s.v.to_vector();
        bool reported = false;
        for (int64_t x = 0; x < P; ++x) {
          const bool ours = x / S == r, full_params = stage <= 2, full_moments = stage == 0;
          double ep = float(param_at(x)), em = float(m_at(x)), ev = float(v_at(x));
          adam.step(t, ep, em, ev, float(grad_at(x)));
          if ((full_params || ours) && !reported) {
            const float seen = p[std::size_t(full_params ? x : x - r * S)];
            if (std::fabs(seen - ep) > 1e-5 * (1 + std::fabs(ep))) {
              reported = true;
              checks.check(false, "rank " + std::to_string(r) + ": parameter " + std::to_string(x) + " (owned by rank " +
                                      std::to_string(x / S) + ") is " + std::to_string(seen) + ", Adam's step " +
                                      std::to_string(t) + " gives " + std::to_string(ep) +
                                      (ours ? "" : ": a rank that keeps all the parameters must hold every updated one"
                                                   " (else the replicas diverge)"));
            }
          }
          if ((full_moments || ours) && !reported) {
            const std::size_t i = std::size_t(full_moments ? x : x - r * S);
            if (std::fabs(m[i] - em) > 1e-6 || std::fabs(v[i] - ev) > 1e-7) {
              reported = true;
              checks.check(false, "rank " + std::to_string(r) + ": Adam's m, v of parameter " + std::to_string(x) +
                                      " did not take step " + std::to_string(t) + " once");
            }
          }
        }
        ctx.comm.barrier();
        const int64_t sent = ctx.comm.traffic().bytes_sent(r);
        if ((stage == 0 || stage == 3) && sent != 0)
          checks.check(false, "rank " + std::to_string(r) + " sent " + std::to_string(sent) + " bytes at the update; "
                                  "at stage " + std::to_string(stage) + " nobody needs anything from it then");
        if ((stage == 1 || stage == 2) && sent != 4 * (world - 1) * S)
          checks.check(false, "rank " + std::to_string(r) + " sent " + std::to_string(sent) + " bytes at the update: "
                                  "one all-gather of the parameters sends (N-1)·S floats");
        ctx.comm.barrier();
      });
      INFO(checks.text());
      CHECK(checks.failed.empty());
    }
}

// ----------------------------------------------------------------------------
// layer_parameters, layer_done, gather_layer, release_layer

TEST_CASE("gather_layer: the layer's full parameters from every shard, on the ring, charged to comm buffers",
          "[ch07][needs:partition_parameters][needs:shard_bounds]") {
  for (int world : {1, 2, 4}) {
    INFO(world << " ranks");
    dpt_test::RankChecks checks;
    dpt_test::run_ranks(world, [&](Context& ctx) {
      Partition part{45, world, (45 + world - 1) / world, 0};
      part.padded = part.shard * world;
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
        Partition part{40, world, (40 + world - 1) / world, 0};
        part.padded = part.shard * world;
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

// ----------------------------------------------------------------------------
// the chapter

namespace {
// Ψ = 32·15+15 + 15·4+4 = 559: not divisible by 2, 3 or 4.
const std::string kProblem =
    "--quiet --model 32-15-4 --samples 256 --steps 12 --batch 8 --optimizer adamw --weight-decay 0.05 --lr 0.01";

std::vector<float> read_flat(const std::string& path) {
  SafeTensorsFile file = read_safetensors(path);
  std::vector<float> flat;
  for (const char* name : {"fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias"}) {
    REQUIRE(file.tensors.count(name) == 1);
    auto v = file.tensors.at(name).floats();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  std::remove(path.c_str());
  return flat;
}

// Runs ch07 (threads, or mpirun when np > 0) and returns its final weights, flat.
std::vector<float> chapter_weights(int ranks, const std::string& flags, bool mpi = false,
                                   const std::string& problem = kProblem) {
  std::string path = dpt_test::temp_path("ch07_" + std::to_string(ranks) + ".safetensors");
  std::string args = flags + " --no-verify " + problem + " --save-weights " + path;
  auto run = mpi ? dpt_test::run_mpi("ch07_zero", ranks, "--comm mpi --comm-timeout 20 " + args)
                 : dpt_test::run_program("ch07_zero", "--ranks " + std::to_string(ranks) + " " + args);
  INFO(ranks << (mpi ? " processes " : " threads ") << flags << ": " << dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  return read_flat(path);
}

// The oracle: the core's MLP and AdamW on one device with the global batch.
std::vector<float> one_device_weights(int world, const std::string& problem = kProblem) {
  Options o;
  CLI::App app;
  add_common_flags(app, o);
  app.add_option("--weight-decay");
  app.parse(problem);
  Dataset data = load_dataset(o);
  MLP model = train_single_device(o, data, o.batch * world, [&o](std::vector<Tensor> params) {
    return std::make_unique<Adam>(std::move(params), o.lr, 0.9f, 0.999f, 1e-8f, 0.05f, true);  // AdamW, λ = 0.05
  });
  return flatten(model.parameters());
}

const char* kStages[] = {"--stage 1", "--stage 2", "--stage 2 --bucket-mb 1", "--stage 3",
                         "--stage 3 --prefetch"};
}  // namespace

TEST_CASE("chapter: every stage gives stage 0's weights bit for bit, and stage 0 one device's (threads)", "[ch07]") {
  for (int ranks : {3, 4}) {
    std::vector<float> stage0 = chapter_weights(ranks, "--stage 0");
    CHECK(max_abs_difference(stage0, one_device_weights(ranks)) < kSingleDeviceTolerance);
    for (const char* stage : kStages) {
      INFO(ranks << " ranks, " << stage);
      CHECK(max_abs_difference(chapter_weights(ranks, stage), stage0) == 0);  // same sums, same order, same Adam
    }
  }
}

TEST_CASE("chapter: on one rank every stage takes one device's steps bit for bit (the core's linear and Adam)",
          "[ch07]") {
  // One rank: the ring moves nothing and the mean divides by 1, so what is
  // left is zero_linear's forward and backward and the flat Adam — the same
  // kernels as the core's Linear, linear() and dpt::Adam, called in the same
  // order, so not one bit may differ. 64 outputs and a batch of 16: wide and
  // tall enough that a bias gradient summed in another order than the core's
  // sum_rows (e.g. a plain row loop; Eigen sums 4 rows at a time) differs.
  const std::string problem =
      "--quiet --model 32-64-10 --samples 256 --steps 6 --batch 16 --optimizer adamw --weight-decay 0.05 --lr 0.01";
  std::vector<float> one = one_device_weights(1, problem);
  for (const char* stage : {"--stage 0", "--stage 2", "--stage 3 --prefetch"}) {
    INFO(stage);
    CHECK(max_abs_difference(chapter_weights(1, stage, false, problem), one) == 0);
  }
}

TEST_CASE("chapter: stage 0 hands its buffers to the step check only on the steps rank 0's recorder keeps, "
          "asked every step",
          "[ch07]") {
  // On a GPU each observed step copies Ψ parameters and gradients to the
  // host, so the engine asks observe_stage0_wants first. A budget of 3
  // snapshots (8Ψ bytes each) over 9 steps: stride (9 + 1) / 2 = 5, so the
  // recorder keeps steps 0, 5 and 8 (the last) on rank 0 and none on rank 1,
  // yet counts all 9 as run (the verdict says "3 of 9 steps").
  Options o;
  CLI::App app;
  add_common_flags(app, o);
  app.add_option("--weight-decay");
  std::string problem = kProblem;
  problem.replace(problem.find("--steps 12"), 10, "--steps 9");
  app.parse(problem);
  Dataset data = load_dataset(o);
  const std::vector<float> initial = flatten(build_model(o, Device::host()).parameters());
  const std::size_t budget = 3 * 8 * initial.size();
  std::vector<std::vector<int64_t>> observed(2);
  std::vector<int64_t> asked(2, 0);
  StepCheck check;
  dpt_test::run_ranks(2, [&](Context& ctx) {
    StepRecorder recorder(ctx.is_root(), budget);
    ZeroPlan plan;  // stage 0, Adam's defaults
    const std::size_t r = std::size_t(ctx.rank);
    plan.observe_stage0 = [&](int64_t step, const float* p, const float* g, int64_t psi) {
      observed[r].push_back(step);
      recorder.record(step, o.steps, p, g, psi);
    };
    plan.observe_stage0_wants = [&](int64_t step, int64_t psi) {
      ++asked[r];
      return recorder.keeps(step, o.steps, psi);
    };
    train_zero(ctx, o, data, initial, plan, "test");
    if (ctx.is_root()) check = recorder.replay(o, data, o.batch * ctx.world);
  });
  CHECK(asked == std::vector<int64_t>{9, 9});
  CHECK(observed[0] == std::vector<int64_t>{0, 5, 8});
  CHECK(observed[1].empty());
  CHECK(check.steps_run == 9);
  CHECK(check.checked == std::vector<int64_t>{0, 5, 8});
  CHECK(check.difference <= kStepGradientTolerance);
}

TEST_CASE("chapter: under mpirun -np 2 and 4, every stage gives the threads' stage 0 weights", "[ch07][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (int np : {2, 4}) {
    std::vector<float> stage0 = chapter_weights(np, "--stage 0");
    for (const char* stage : {"--stage 0", "--stage 1", "--stage 2", "--stage 3 --prefetch"}) {
      INFO(np << " processes, " << stage);
      CHECK(max_abs_difference(chapter_weights(np, stage, true), stage0) == 0);
    }
  }
}

namespace {
nlohmann::json chapter_report(int ranks, const std::string& flags) {
  std::string path = dpt_test::temp_path("ch07_report.json");
  auto run = dpt_test::run_program("ch07_zero", "--ranks " + std::to_string(ranks) + " --quiet --no-verify --steps 3 " +
                                                    "--model 64-128-96-10 --batch 4 " + flags + " --report-json " + path);
  INFO(flags << ": " << dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  std::ifstream in(path);
  nlohmann::json report = nlohmann::json::parse(in);
  std::remove(path.c_str());
  return report;
}
}  // namespace

TEST_CASE("chapter: per-rank memory follows the ZeRO formula plus named extras, bytes per step follow theory",
          "[ch07]") {
  const int n = 4;
  // 64-128-96-10: layers of 8,320, 12,384 and 970 floats; Ψ = 21,674 = 4·5418.5, padded by 2.
  const double layer[] = {64 * 128 + 128, 128 * 96 + 96, 96 * 10 + 10};
  const double psi = layer[0] + layer[1] + layer[2];
  const double shard = std::ceil(psi / n), padded = n * shard;
  // The formulas, written out here: fp32 weights, gradients, Adam m and v.
  const double held[] = {16 * padded, 8 * padded + 8 * shard, 4 * padded + 12 * shard, 16 * shard};
  // Comm buffers at most: none at stages 0-1; one open bucket (--bucket-mb 0.05 = 13,107 floats: every layer
  // alone, the largest 12,384) at stage 2; that and one gathered layer (the largest) at stage 3.
  const double comm[] = {0, 0, 4 * layer[1], 4 * (layer[1] + layer[1])};
  for (int stage = 0; stage <= 3; ++stage) {
    nlohmann::json report = chapter_report(n, "--stage " + std::to_string(stage) + " --bucket-mb 0.05");
    REQUIRE(report["ranks"].size() == std::size_t(n));
    CHECK(double(report["comm_formula_bytes"]) == comm[stage]);  // from the layout, never from the run
    double worst_peak = 0;
    for (const auto& rank : report["ranks"]) {
      INFO("stage " << stage << ", rank " << rank["rank"]);
      const auto& at = rank["at_peak"];
      double states = double(at["parameters"]) + double(at["gradients"]) + double(at["optimizer state"]);
      CHECK(states == held[stage]);  // exactly what the stage keeps, on the padded buffer
      INFO("comm buffers' own peak " << double(rank["peak"]["comm buffers"]) << " bytes, at most " << comm[stage]
                                     << ": one open bucket and one gathered layer at a time");
      CHECK(double(rank["peak"]["comm buffers"]) <= comm[stage]);
      worst_peak = std::max(worst_peak, double(rank["peak_total"]));
      // Bytes: 2 (stages 0-2) or 3 (stage 3) collectives of Ψ floats, (N−1)/N of each leaves a rank;
      // the ring moves N·S floats, so the padding's share is the only slack.
      double theory = (stage == 3 ? 3 : 2) * psi * 4 * (n - 1) / n;
      CHECK(std::fabs(double(rank["sent_per_step"]) - theory) <= 12 * (padded - psi));
    }
    // Stage 3's extras are real: the peak holds at least one gathered layer (the largest) beside the shards.
    if (stage == 3) CHECK(worst_peak >= held[3] + 4 * layer[1]);
  }
}

TEST_CASE("chapter: with --device-memory 2MiB the default model runs out of memory at stage 0, trains at stage 3",
          "[ch07]") {
  auto fail = dpt_test::run_program("ch07_zero", "--ranks 4 --steps 3 --quiet --no-verify --stage 0 --device-memory 2MiB");
  INFO(fail.output);
  CHECK(fail.exit_code == 1);
  CHECK_THAT(fail.output, contains_text("out of memory on cpu:") && contains_text("[rank ") &&
                              contains_text("asked for") && contains_text("in use") && contains_text("2.00 MiB capacity") &&
                              contains_text("--stage 2"));
  auto fits = dpt_test::run_program("ch07_zero", "--ranks 4 --steps 3 --quiet --stage 3 --device-memory 2MiB");
  INFO(dpt_test::summary_line(fits.output));
  CHECK(fits.exit_code == 0);
  auto bad = dpt_test::run_program("ch07_zero", "--ranks 2 --steps 1 --device-memory 2XB");
  CHECK(bad.exit_code == 2);  // refused at parse time, like every bad flag
  CHECK_THAT(bad.output, contains_text("--device-memory"));
}

TEST_CASE("chapter: a bad ch07 flag is refused at parse time, naming it (exit 2)", "[ch07]") {
  for (const char* bad : {"--bucket-mb nan", "--bucket-mb inf", "--weight-decay nan", "--weight-decay -0.1",
                          "--optimizer sgd", "--optimizer momentum"}) {
    auto run = dpt_test::run_program("ch07_zero", std::string("--ranks 2 --steps 1 --quiet ") + bad);
    INFO(bad << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, contains_text(std::string(bad).substr(0, std::string(bad).find(' '))));
  }
  auto help = dpt_test::run_program("ch07_zero", "--help");
  CHECK_THAT(help.output, contains_text("adam | adamw") && !contains_text("sgd |"));
}

TEST_CASE("chapter: under mpirun, ranks started with different ch07 flags stop naming the flag", "[ch07][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  const std::string program = dpt_test::program_path("ch07_zero") +
                              " --comm mpi --comm-timeout 20 --quiet --no-verify --steps 2 --model 32-15-4 --samples 64 ";
  // Rank 0 runs --stage 3; rank 1 the same but for one flag.
  for (const char* flag : {"--stage 1", "--stage 3 --prefetch", "--stage 3 --bucket-mb 0.01",
                           "--stage 3 --weight-decay 0.2"}) {
    auto run = dpt_test::run_mpmd(program + "--stage 3", program + flag);
    INFO(flag << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code != 0);
    std::string last = std::string(flag).substr(std::string(flag).rfind("--"));
    CHECK_THAT(run.output, contains_text(last.substr(0, last.find(' '))) &&
                               contains_text("every rank needs the same flags"));
  }
}

TEST_CASE("chapter: in the student build copy_floats and divide_floats name a call that runs past its tensor",
          "[ch07]") {
  if (!float_ranges_checked()) {
    WARN("skipped: only the student build (DPT_STUDENT=ON) checks float ranges");
    return;
  }
  Tensor small = Tensor::zeros({10}, Device::cpu(6)), big = Tensor::zeros({100}, Device::cpu(6));
  CHECK_THROWS_WITH(copy_floats(small.data() + 4, big.data(), 8),
                    contains_text("copy_floats: out of bounds") && contains_text("destination") &&
                        contains_text("floats [4, 12) of a tensor of 10 floats"));
  CHECK_THROWS_WITH(divide_floats(small.data() + 12, 3, 2.0f), contains_text("divide_floats: out of bounds"));
  CHECK_THROWS_WITH(add_floats(big.data(), small.data() + 9, 2), contains_text("add_floats: out of bounds") &&
                                                                     contains_text("source"));
  CHECK_NOTHROW(copy_floats(small.data() + 2, big.data() + 90, 8));  // inside both: fine
}

// ----------------------------------------------------------------------------
// sharded checkpoints (the core's dpt/sharded_checkpoint.h)

namespace {
std::string fresh_dir(const std::string& name) {
  std::string dir = dpt_test::temp_path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Runs ch07 with `flags` on `ranks` threads (or processes), expects success, returns the flat weights.
std::vector<float> run_and_read(int ranks, const std::string& flags, bool mpi = false) {
  std::string path = dpt_test::temp_path("ch07_ck_" + std::to_string(ranks) + ".safetensors");
  std::string args = "--quiet --no-verify --model 32-15-4 --samples 256 --optimizer adamw --weight-decay 0.05 "
                     "--lr 0.01 " + flags + " --save-weights " + path;
  auto run = mpi ? dpt_test::run_mpi("ch07_zero", ranks, "--comm mpi --comm-timeout 20 " + args)
                 : dpt_test::run_program("ch07_zero", "--ranks " + std::to_string(ranks) + " " + args);
  INFO(ranks << " ranks " << flags << ": " << dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  return read_flat(path);
}
}  // namespace

TEST_CASE("chapter: a run resumed from a sharded checkpoint continues bit for bit, at any stage", "[ch07]") {
  std::string dir = fresh_dir("ch07_resume");
  std::vector<float> straight = run_and_read(4, "--batch 8 --steps 12 --stage 0");
  run_and_read(4, "--batch 8 --steps 5 --stage 2 --save-checkpoint " + dir + " --checkpoint-every 2");  // saves 2, 4, 5
  // Parameters, both moments, the step count and the data order all come back: not one bit differs.
  CHECK(max_abs_difference(run_and_read(4, "--batch 8 --steps 12 --stage 3 --resume " + dir), straight) == 0);
  CHECK(max_abs_difference(run_and_read(4, "--batch 8 --steps 12 --stage 1 --resume " + dir + "/step-00000004"), straight) == 0);
  // The consolidated file holds the weights of step 5, in PyTorch's layout (what load_weights reads).
  std::string out = dpt_test::temp_path("ch07_consolidated.safetensors");
  auto consolidate = dpt_test::run_program("ch07_zero", "--consolidate " + dir + " --save-weights " + out);
  REQUIRE(consolidate.exit_code == 0);
  CHECK(max_abs_difference(read_flat(out), run_and_read(4, "--batch 8 --steps 5 --stage 0")) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("chapter: a checkpoint of 4 ranks resumes on 2 and 3 (re-sharded) like the unsharded run", "[ch07]") {
  std::string dir = fresh_dir("ch07_reshard");
  std::vector<float> straight = run_and_read(4, "--batch 6 --steps 12 --stage 0");
  run_and_read(4, "--batch 6 --steps 5 --stage 3 --save-checkpoint " + dir);
  // Same global batch (24) on fewer ranks: the sums change order, so the single-device bound applies.
  CHECK(max_abs_difference(run_and_read(2, "--batch 12 --steps 12 --stage 3 --resume " + dir), straight) < kSingleDeviceTolerance);
  CHECK(max_abs_difference(run_and_read(3, "--batch 8 --steps 12 --stage 1 --resume " + dir), straight) < kSingleDeviceTolerance);
  // A different run is refused by name: another global batch.
  auto other = dpt_test::run_program("ch07_zero", "--ranks 2 --quiet --model 32-15-4 --samples 256 --optimizer adamw "
                                                  "--weight-decay 0.05 --lr 0.01 --batch 8 --steps 12 --resume " + dir);
  CHECK(other.exit_code == 1);
  CHECK_THAT(other.output, contains_text("global_batch 24") && contains_text("global_batch 16"));
  std::filesystem::remove_all(dir);
}

// Its own test case, with "mpirun" in the name: CI runs those apart (LeakSanitizer off: Open MPI keeps memory).
TEST_CASE("chapter: under mpirun -np 2, a checkpoint of 4 rank threads resumes re-sharded like the unsharded run",
          "[ch07][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  std::string dir = fresh_dir("ch07_reshard_mpi");
  std::vector<float> straight = run_and_read(4, "--batch 6 --steps 12 --stage 0");
  run_and_read(4, "--batch 6 --steps 5 --stage 3 --save-checkpoint " + dir);
  CHECK(max_abs_difference(run_and_read(2, "--batch 12 --steps 12 --stage 2 --resume " + dir, true), straight) <
        kSingleDeviceTolerance);
  std::filesystem::remove_all(dir);
}

TEST_CASE("chapter: a broken newest checkpoint is an error naming the file, and the one before still resumes", "[ch07]") {
  namespace fs = std::filesystem;
  std::vector<float> straight = run_and_read(2, "--batch 8 --steps 8 --stage 0");
  const std::string resume = "--quiet --no-verify --ranks 2 --model 32-15-4 --samples 256 --optimizer adamw "
                             "--weight-decay 0.05 --lr 0.01 --batch 8 --steps 8 --resume ";
  auto truncate = [](const std::string& path) { fs::resize_file(path, fs::file_size(path) / 2); };
  struct Breakage { const char* what; std::function<void(const std::string&)> apply; const char* named; };
  for (const Breakage& b : {Breakage{"shard missing", [](const std::string& s) { fs::remove(s + "/shard-00001-of-00002.safetensors"); },
                                     "shard-00001-of-00002"},
                            Breakage{"shard truncated", [&](const std::string& s) { truncate(s + "/shard-00000-of-00002.safetensors"); },
                                     "shard-00000-of-00002"},
                            Breakage{"no completion marker", [](const std::string& s) { fs::remove(s + "/COMPLETE"); },
                                     "COMPLETE"}}) {
    INFO(b.what);
    std::string dir = fresh_dir("ch07_broken");
    run_and_read(2, "--batch 8 --steps 4 --stage 2 --save-checkpoint " + dir + " --checkpoint-every 3");  // 3 and 4
    b.apply(dir + "/step-00000004");
    auto broken = dpt_test::run_program("ch07_zero", resume + dir + "/step-00000004");
    CHECK(broken.exit_code == 1);
    CHECK_THAT(broken.output, contains_text(b.named));
    CHECK(max_abs_difference(run_and_read(2, "--batch 8 --steps 8 --stage 2 --resume " + dir + "/step-00000003"), straight) == 0);
    fs::remove_all(dir);
  }
}

TEST_CASE("chapter: a checkpoint from 4 ranks resumed on 2 passes every verdict (stage 0 resumes from it too)", "[ch07]") {
  // The stage-0 comparison run must start where the resumed run started; from
  // the master copy on 2 ranks it differed by 1e-6 and printed a false ✘.
  const std::string dir = dpt_test::temp_path("ch07_resume_verdicts");
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  auto save = dpt_test::run_program("ch07_zero", "--ranks 4 --batch 8 --steps 6 --quiet --stage 3 --save-checkpoint " + dir);
  INFO(dpt_test::summary_line(save.output));
  REQUIRE(save.exit_code == 0);
  auto resume = dpt_test::run_program("ch07_zero", "--ranks 2 --batch 16 --steps 10 --quiet --stage 3 --resume " + dir);
  INFO(dpt_test::summary_line(resume.output));
  CHECK(resume.exit_code == 0);
  CHECK_THAT(resume.output, contains_text("max |w_stage3 - w_stage0|: 0 ") && contains_text("over 4 of 10 steps"));
  CHECK_THAT(resume.output, !contains_text("started from the master copy"));
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}
