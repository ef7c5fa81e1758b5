// test_ch11.cpp — chapter 11's holes. update_loss_scale against ch11.h's
// laws: the step-by-step ones evaluated on the trace of scales it produced
// (scripted and pseudo-random sequences of clean and overflowed steps), and
// the goal, on runs where a step overflows exactly when its scale is above a
// ceiling S*. GradScaler's exact rule is the reference's choice, checked
// against PyTorch in tests/pytorch/crosscheck_ch11.py (label pytorch, the
// reference build only).
// master_step against updates written out here: SGD's p − lr·g on values
// chosen so float arithmetic is exact (at a scale of 1000: to 1 ulp), and
// the skip rule checked bit for bit against a run at scale 1 that never saw
// the overflowed step.
//
// Here: the holes. The rounding (provided) in test_ch11_rounding.cpp, the
// chapter's program in test_ch11_chapter.cpp.
#include "support/catch.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "ch11.h"
#include "dpt/optim.h"

using namespace dpt;
using namespace dpt::ch11;

// ----------------------------------------------------------------------------
// update_loss_scale

namespace {
// Runs a scaler over `events` ('C' clean, 'O' overflowed) and checks ch11.h's
// step-by-step laws after every call, on the trace so far: S[t] is the scale
// after call t, S[0] the start.
void check_laws(LossScaler scaler, const std::string& events) {
  const int64_t n = scaler.growth_interval;
  std::vector<float> S = {scaler.scale};
  int64_t clean_run = 0;  // clean steps in a row up to t, none of them growing the scale
  for (std::size_t t = 1; t <= events.size(); ++t) {
    const bool overflowed = events[t - 1] == 'O';
    update_loss_scale(scaler, overflowed);
    S.push_back(scaler.scale);
    const float before = S[t - 1], after = S[t];
    const std::size_t from = t > std::size_t(4 * n) + 2 ? t - std::size_t(4 * n) - 2 : 0;
    INFO("call " << t << " (" << (overflowed ? "overflowed" : "clean") << "), growth_interval " << n << ": the scale went from "
                 << before << " to " << after << "; the last steps' events " << events.substr(from, t - from));
    {
      INFO("law: the scale and its reciprocal are finite floats above 0");
      REQUIRE((std::isfinite(after) && after > 0 && std::isfinite(1 / after)));
    }
    if (overflowed) {
      INFO("law: an overflow shrinks the scale (unless 1 / (scale / 2) is not a finite float)");
      REQUIRE((after < before || !std::isfinite(1 / (before / 2))));
      clean_run = 0;
      continue;
    }
    {
      INFO("law: a clean step never shrinks the scale");
      REQUIRE(after >= before);
    }
    clean_run = after > before ? 0 : clean_run + 1;
    INFO("law: it keeps probing upwards — among any " << 4 * n << " clean steps in a row (4 x growth_interval) one "
         "grows the scale; here " << clean_run << " clean steps in a row left it at " << after);
    REQUIRE((clean_run < 4 * n || !std::isfinite(2 * after)));
  }
}

// A reproducible sequence of `count` events, each an overflow with probability p.
std::string random_events(unsigned seed, std::size_t count, double p) {
  std::mt19937 rng(seed);
  std::string events;
  for (std::size_t i = 0; i < count; ++i) events += double(rng()) < p * 4294967296.0 ? 'O' : 'C';
  return events;
}
}  // namespace

TEST_CASE("update_loss_scale: keeps its laws on a scripted run", "[ch11]") {
  LossScaler s;
  s.scale = 1024, s.growth_interval = 3;
  // Runs of clean steps long and short, an overflow after 2 clean ones, one after 1, two in a row.
  check_laws(s, "CCCCOCCOOCCCCCCCOCOCCCCCCCCCCCCCCOCCC");
}

TEST_CASE("update_loss_scale: keeps its laws on pseudo-random runs", "[ch11]") {
  // From 2^64: room for 90 overflows of a scaler that shrinks by 4 (p = 0.3) before a float runs out.
  for (int64_t interval : {1, 2, 3, 7})
    for (double p : {0.02, 0.1, 0.3})
      for (unsigned seed : {1u, 2u, 3u}) {
        LossScaler s;
        s.scale = 0x1p64f, s.growth_interval = interval;
        check_laws(s, random_events(seed * 100 + unsigned(interval), 300, p));
      }
}

TEST_CASE("update_loss_scale: stays a float, its reciprocal too, at both ends of float's range", "[ch11]") {
  LossScaler s;
  s.scale = 0x1p127f, s.growth_interval = 1;  // x2 would be 2^128: inf in float
  for (int k = 0; k < 8; ++k) update_loss_scale(s, false);
  INFO("eight clean steps from 2^127 (growth_interval 1): the scale must still be a finite float, got " << s.scale);
  CHECK(std::isfinite(s.scale));
  LossScaler near;
  near.scale = 0x1p126f, near.growth_interval = 2;
  check_laws(near, "CCCCCCCCCCOCCCCOOCCCCCCCCC");  // up to the top, held there, down and up again
  LossScaler low;
  low.scale = 0x1p-120f, low.growth_interval = 2;
  check_laws(low, "OOOOOOOOOOOOCCCCCOOOOOOOOOCCC");  // down to where 1/S is no longer a float, held there, up again
}

TEST_CASE("update_loss_scale: settles near the largest safe scale", "[ch11]") {
  // A run whose steps overflow exactly when the scale is above a ceiling S*:
  // ch11.h's goal law, for ceilings that are not powers of two, starting
  // 2^10 above, 2^10 below, and at the ceiling.
  for (int64_t n : {5, 20})
    for (float ceiling : {3000.0f, 0.7f * 65536.0f, 1e-3f})
      for (float start : {ceiling * 1024.0f, ceiling / 1024.0f, ceiling}) {
        LossScaler s;
        s.scale = start, s.growth_interval = n;
        const int64_t steps = 100 * n;
        int64_t skipped = 0;
        float lowest = INFINITY, highest = 0;
        for (int64_t t = 0; t < steps; ++t) {
          const bool overflowed = s.scale > ceiling;
          if (t >= steps / 2) {
            skipped += overflowed;
            lowest = std::min(lowest, s.scale), highest = std::max(highest, s.scale);
          }
          update_loss_scale(s, overflowed);
          INFO("step " << t << ": the scale and its reciprocal must stay finite floats above 0, got " << s.scale);
          REQUIRE((std::isfinite(s.scale) && s.scale > 0 && std::isfinite(1 / s.scale)));
        }
        INFO("growth_interval " << n << ", ceiling S* = " << ceiling << " (a step overflows when its scale is above it), "
             "start " << start << ", " << steps << " steps; through the second half the scale ranged over ["
             << lowest << ", " << highest << "] and " << skipped << " of " << steps / 2 << " steps were skipped");
        {
          INFO("law: through the second half the scale stays within a factor 16 of S*: [" << ceiling / 16 << ", "
               << ceiling * 16 << "]");
          CHECK(lowest >= ceiling / 16);
          CHECK(highest <= ceiling * 16);
        }
        INFO("law: through the second half at most 2 of every growth_interval steps are skipped: " << 2 * (steps / 2) / n);
        CHECK(skipped <= 2 * (steps / 2) / n);
      }
}

TEST_CASE("update_loss_scale: a static scaler never changes", "[ch11]") {
  LossScaler s;
  s.dynamic = false, s.scale = 128, s.growth_interval = 1;
  for (bool overflowed : {true, false, false, true}) {
    update_loss_scale(s, overflowed);
    INFO("a static scale (static:128, or none) must stay 128 whatever happens; got " << s.scale);
    REQUIRE(s.scale == 128);
  }
}

TEST_CASE("LossScaler: the defaults are torch.amp.GradScaler's", "[ch11]") {
  // PyTorch's documented defaults: init_scale 2^16, growth_factor 2.0, backoff_factor 0.5, growth_interval 2000
  // (the settings --loss-scale dynamic starts from; a policy of yours may use the factors or not).
  const LossScaler s;
  CHECK(s.scale == 65536.0f);
  CHECK(s.growth_factor == 2.0f);
  CHECK(s.backoff_factor == 0.5f);
  CHECK(s.growth_interval == 2000);
  CHECK(s.memory == 0);
  CHECK(s.dynamic);
}

// ----------------------------------------------------------------------------
// master_step

namespace {
// A weight tensor of 16-bit values and its master copy, both parameters.
struct Pair {
  std::vector<Tensor> params, masters;
};
Pair make_pair_of(const std::vector<std::vector<float>>& values) {
  Pair p;
  for (const auto& v : values) {
    Tensor w = Tensor::from_vector({int64_t(v.size())}, v, Device::host());
    w.set_requires_grad(true);
    Tensor m = w.clone();
    m.set_requires_grad(true);
    p.params.push_back(w), p.masters.push_back(m);
  }
  return p;
}
void set_grads(std::vector<Tensor>& params, const std::vector<std::vector<float>>& grads) {
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i].set_grad(Tensor::from_vector(params[i].shape(), grads[i], Device::host()));
}
std::vector<float> all_bits(const std::vector<Tensor>& tensors) {
  std::vector<float> out;
  for (const Tensor& t : tensors) out.insert(out.end(), t.data(), t.data() + t.numel());
  return out;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
}  // namespace

TEST_CASE("master_step: one SGD step on the fp32 masters by the loss's own gradient, and each weight its master rounded", "[ch11]") {
  // bf16 weights; gradients of 1024 · loss stored exactly; lr 2^-10.
  Pair p = make_pair_of({{1.0f, -0.5f, 0.25f}, {2.0f}});
  SGD sgd(p.masters, 0x1p-10f);
  set_grads(p.params, {{1024 * 0.375f, 1024 * -1.0f, 0.0f}, {1024 * 3.0f}});
  const bool stepped = master_step(p.params, p.masters, sgd, 1024.0f, Precision::BF16);
  {
    INFO("every gradient is finite: master_step must step and return true");
    REQUIRE(stepped);
  }
  // master − lr · g/1024, exact in float: 1 − 3·2^-13, −0.5 + 2^-10, 0.25, 2 − 3·2^-10.
  const std::vector<float> want = {1.0f - 3 * 0x1p-13f, -0.5f + 0x1p-10f, 0.25f, 2.0f - 3 * 0x1p-10f};
  const std::vector<float> got = all_bits(p.masters);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double moved = double(got[i]) - (i == 0 ? 1.0 : i == 1 ? -0.5 : i == 2 ? 0.25 : 2.0);
    const double should = double(want[i]) - (i == 0 ? 1.0 : i == 1 ? -0.5 : i == 2 ? 0.25 : 2.0);
    INFO("master " << i << " should be " << want[i] << " (moved " << should << " by the loss's own gradient), is " << got[i]
                   << " (moved " << moved << ")"
                   << (should != 0 && std::fabs(moved / should - 1024) < 1 ? ": 1024x the move the loss's own gradient makes"
                       : moved == 0 && should != 0                         ? ": the fp32 master did not move"
                                                                           : ""));
    CHECK(got[i] == want[i]);
  }
  // The weights: the masters rounded to bf16 (round_to is precision.h's, tested in test_ch11_rounding.cpp).
  const std::vector<float> weights = all_bits(p.params);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    INFO("weight " << i << " must be its master rounded to bf16 (round to nearest even), got " << weights[i]
                   << " for master " << got[i]);
    CHECK(weights[i] == round_to(Precision::BF16, got[i]));
  }
}

TEST_CASE("master_step: at a scale that is not a power of two (static:1000), the step is the loss's own gradient's to 1 ulp", "[ch11]") {
  // fp16 gradients of a run scaled by 1000; masters at 0 and SGD at lr 1, so
  // each master ends as minus the loss's own gradient. The contract allows
  // 1 ulp of it: float arithmetic with a scale of 1000 may round the last
  // bit either way (for 5 and −999 it can).
  const std::vector<std::vector<float>> grads = {{5.0f, -999.0f, 3.0f}, {1.0f, 1536.0f}};
  Pair p = make_pair_of({{0.0f, 0.0f, 0.0f}, {0.0f, 0.0f}});
  SGD sgd(p.masters, 1.0f);
  set_grads(p.params, grads);
  REQUIRE(master_step(p.params, p.masters, sgd, 1000.0f, Precision::FP16));
  const std::vector<float> got = all_bits(p.masters);
  std::size_t at = 0;
  for (const auto& row : grads)
    for (float g : row) {
      const float quotient = g / 1000.0f, ulp = std::nextafter(std::fabs(quotient), INFINITY) - std::fabs(quotient);
      INFO("master " << at << " after one SGD step of lr 1 from 0 should be minus the loss's own gradient, "
                     << -quotient << " (to 1 ulp, " << ulp << "), is " << got[at]
                     << (std::fabs(got[at] + g) <= std::fabs(g) * 1e-6f ? ": 1000x the loss's own gradient" : ""));
      CHECK(std::fabs(got[at] + quotient) <= ulp);
      ++at;
    }
}

TEST_CASE("master_step: keeps updates too small for 16 bits in the fp32 master", "[ch11]") {
  // A bf16 weight of 1.0: its neighbours are 1 − 2^-8 and 1 + 2^-7. Ten SGD
  // steps of 0.001 each are each below half a step; 0.01 together is not.
  Pair p = make_pair_of({{1.0f}});
  SGD sgd(p.masters, 1e-3f);
  for (int k = 0; k < 10; ++k) {
    set_grads(p.params, {{1.0f}});
    REQUIRE(master_step(p.params, p.masters, sgd, 1.0f, Precision::BF16));
  }
  const float master = p.masters[0].data()[0], weight = p.params[0].data()[0];
  {
    INFO("after 10 updates of 0.001 the fp32 master must be 0.99 (to float rounding), it is " << master
         << (master > 0.99f + 1e-6f ? ": the ten updates did not add up in the fp32 master" : ""));
    CHECK(std::fabs(master - 0.99f) <= 1e-6f);
  }
  INFO("the bf16 weight must be the master rounded to bf16: 0.99 -> 0.98828125 (= 253 * 2^-8), got " << weight);
  CHECK(weight == 0.98828125f);
}

TEST_CASE("master_step: skips a step with an inf or NaN gradient, every bit kept, whatever the scale", "[ch11]") {
  // Momentum SGD and Adam. The reference: two good steps at scale 1 with gradients g. Yours: good, overflowed,
  // good at scale 4 with gradients 4g (exact in float): the same two steps of the loss's own gradient, so the
  // same bits at the end.
  for (const std::string name : {"momentum", "adam"})
    for (float bad : {INFINITY, -INFINITY, NAN}) {
      INFO(name << ": the bad gradient entry is " << bad);
      auto fresh = [] { return make_pair_of({{0.5f, -1.0f}, {0.25f, 0.75f, 2.0f}}); };
      auto optimizer = [&](Pair& p) -> std::unique_ptr<Optimizer> {
        if (name == "adam") return std::make_unique<Adam>(p.masters, 0.01f);
        return std::make_unique<SGD>(p.masters, 0.25f, 0.9f);
      };
      auto times = [](float k, std::vector<std::vector<float>> g) {
        for (auto& row : g)
          for (float& x : row) x *= k;
        return g;
      };
      const std::vector<std::vector<float>> g1 = {{0.5f, 1.0f}, {-2.0f, 0.25f, 1.0f}}, g2 = {{1.0f, -1.0f}, {0.5f, 0.5f, -0.25f}};
      Pair ref = fresh();
      auto ref_opt = optimizer(ref);
      set_grads(ref.params, g1);
      master_step(ref.params, ref.masters, *ref_opt, 1.0f, Precision::FP16);
      set_grads(ref.params, g2);
      master_step(ref.params, ref.masters, *ref_opt, 1.0f, Precision::FP16);
      Pair p = fresh();
      auto opt = optimizer(p);
      set_grads(p.params, times(4, g1));
      REQUIRE(master_step(p.params, p.masters, *opt, 4.0f, Precision::FP16));
      const std::vector<float> w0 = all_bits(p.params), m0 = all_bits(p.masters), s0 = all_bits(opt->state_tensors());
      set_grads(p.params, {{1.0f, 1.0f}, {1.0f, 1.0f, bad}});  // the last entry: finite ones come first
      const bool stepped = master_step(p.params, p.masters, *opt, 4.0f, Precision::FP16);
      {
        INFO("master_step must return false for a step whose gradients overflowed");
        CHECK_FALSE(stepped);
      }
      {
        INFO("a skipped step must leave the 16-bit weights bit-identical");
        CHECK(same_bits(w0, all_bits(p.params)));
      }
      {
        INFO("a skipped step must leave the fp32 masters bit-identical (the finite entries included)");
        CHECK(same_bits(m0, all_bits(p.masters)));
      }
      {
        INFO("a skipped step must leave the optimizer's state bit-identical");
        CHECK(same_bits(s0, all_bits(opt->state_tensors())));
      }
      set_grads(p.params, times(4, g2));
      REQUIRE(master_step(p.params, p.masters, *opt, 4.0f, Precision::FP16));
      INFO("good, overflowed, good at scale 4 must end where good, good at scale 1 ends, bit for bit: the step is the "
           "loss's own gradient's whatever the scale, and the skipped step counts as no step (Adam's bias correction "
           "counts steps)");
      CHECK(same_bits(all_bits(ref.masters), all_bits(p.masters)));
      CHECK(same_bits(all_bits(ref.params), all_bits(p.params)));
    }
}
