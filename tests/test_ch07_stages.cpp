// test_ch07_stages.cpp — chapter 07's on_bucket_ready and update_parameters,
// stage by stage, against serial sums, the library's reduce-scatter, the
// traffic log and an Adam step written out in double (no code shared with
// dpt's optimizers).
#include "support/catch.h"
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "ch07.h"
#include "dpt/optim.h"
#include "support/ch07_ranks.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch07;
using dpt_test::clear_traffic;
using dpt_test::on_device;
using dpt_test::state_for;

// ----------------------------------------------------------------------------
// the stages: on_bucket_ready, update_parameters

namespace {
// A float with every digit that tells two floats apart.
std::string digits9(float value) {
  std::ostringstream out;
  out << std::setprecision(9) << value;
  return out.str();
}

// Rank r's gradient of flat element x: distinct per rank and element, exact in float.
float grad_value(int rank, int64_t x) { return float((x * 7 + rank * 13) % 101) / 8.0f - 3.0f; }
constexpr float kUntouched = -99.0f;  // what a float no hole should write holds
}  // namespace

TEST_CASE("on_bucket_ready: each stage leaves the mean where it keeps gradients, and sends no more than it needs",
          "[ch07][needs:shard_bounds]") {
  for (int stage = 0; stage <= 3; ++stage)
    for (int world : {1, 2, 3, 4}) {
      Partition part = dpt_test::ceil_partition(23, world);
      for (Range range : {Range{0, 23}, Range{5, 17}, Range{20, 23}}) {
        dpt_test::require_shard_bounds(part, range);  // a fault of shard_bounds is named as its own
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
            checks.check(false, "rank " + std::to_string(r) + " sent " + std::to_string(sent) + " bytes at stage " +
                                    std::to_string(stage) + "; leaving each rank only its own part's mean needs " +
                                    std::to_string(needed) + " from it: from stage 1 on no rank needs the other "
                                    "ranks' means");
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
          "[ch07][needs:shard_bounds]") {
  const int64_t t = 3;
  AdamOracle adam;
  adam.c.lr = 0.01f, adam.c.weight_decay = 0.05f, adam.c.decoupled = true;
  for (int stage = 0; stage <= 3; ++stage)
    for (int world : {1, 2, 3}) {
      INFO("stage " << stage << ", " << world << " ranks");
      dpt_test::require_shard_bounds(dpt_test::ceil_partition(29, world), {0, dpt_test::ceil_partition(29, world).padded});
      dpt_test::RankChecks checks;
      dpt_test::run_ranks(world, [&](Context& ctx) {
        const int r = ctx.rank;
        Partition part = dpt_test::ceil_partition(29, world);
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
