// test_ch11.cpp — chapter 11's holes. update_loss_scale against sequences of
// scales worked out by hand from ch11.h's guarantees (torch.amp.GradScaler's
// behaviour), not by running code.
// master_step against updates written out here: SGD's p − lr·g on values
// chosen so float arithmetic is exact (and, at a scale of 1000, either
// g / S or g · (1/S) to 1 ulp), the skip rule checked bit for bit
// against a run that never saw the overflowed step.
//
// Here: the holes. The rounding (provided) in test_ch11_rounding.cpp, the
// chapter's program in test_ch11_chapter.cpp.
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <memory>

#include "ch11.h"
#include "dpt/optim.h"

using namespace dpt;
using namespace dpt::ch11;

// ----------------------------------------------------------------------------
// update_loss_scale

TEST_CASE("update_loss_scale: follows GradScaler's rule step by step", "[ch11]") {
  LossScaler s;
  s.scale = 1024, s.growth_interval = 3;
  // (overflowed?, scale after, clean steps counted after), by GradScaler's rule:
  struct Step { bool overflowed; float scale; int64_t good; };
  const Step steps[] = {
      {false, 1024, 1}, {false, 1024, 2}, {false, 2048, 0},  // 3 clean in a row: x2, count from 0
      {false, 2048, 1}, {true, 1024, 0},                     // overflow: x0.5, the count starts again
      {false, 1024, 1}, {false, 1024, 2}, {true, 512, 0},    // 2 clean are not 3
      {true, 256, 0},                                        // again: x0.5
      {false, 256, 1}, {false, 256, 2}, {false, 512, 0},     // 3 clean since the overflow: x2
      {false, 512, 1}, {false, 512, 2}, {false, 1024, 0},
  };
  int k = 0;
  for (const Step& want : steps) {
    ++k;
    update_loss_scale(s, want.overflowed);
    INFO("call " << k << " (" << (want.overflowed ? "overflowed" : "clean") << "): the scale should be " << want.scale
                 << " with " << want.good << " clean steps counted, got " << s.scale << " and " << s.good_steps
                 << (want.overflowed ? " — after an overflow the scale must back off (x0.5) and the count restart"
                                     : " — the scale grows (x2) only after growth_interval clean steps in a row"));
    REQUIRE(s.scale == want.scale);
    REQUIRE(s.good_steps == want.good);
  }
}

TEST_CASE("update_loss_scale: never grows the scale to infinity", "[ch11]") {
  LossScaler s;
  s.scale = 0x1p127f, s.growth_interval = 1;  // x2 would be 2^128: inf in float
  update_loss_scale(s, false);
  INFO("2^127 x 2 is not a float: the scale must stay 2^127 (GradScaler keeps it when the grown one is not finite), got "
       << s.scale);
  CHECK(s.scale == 0x1p127f);
  INFO("and the count starts again, as after a growth: got " << s.good_steps);
  CHECK(s.good_steps == 0);
}

TEST_CASE("update_loss_scale: a static scaler never changes", "[ch11]") {
  LossScaler s;
  s.dynamic = false, s.scale = 128, s.growth_interval = 1;
  for (bool overflowed : {true, false, false, true}) {
    update_loss_scale(s, overflowed);
    INFO("a static scale (static:128, or none) must stay 128 with its count 0 whatever happens; got " << s.scale
                                                                                                  << " and " << s.good_steps);
    REQUIRE(s.scale == 128);
    REQUIRE(s.good_steps == 0);
  }
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

TEST_CASE("master_step: SGD on the fp32 master with the unscaled gradient, then the weights rounded", "[ch11]") {
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
    INFO("master " << i << " should be " << want[i] << " (moved " << should << "), is " << got[i] << " (moved " << moved
                   << ")" << (should != 0 && std::fabs(moved / should - 1024) < 1 ? ": 1024x the update — the gradient "
                                                                                    "was not divided by the scale"
                              : moved == 0 && should != 0 ? ": the update is missing from the fp32 master" : ""));
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

TEST_CASE("master_step: with a scale that is not a power of two (static:1000), the gradient is unscaled to 1 ulp", "[ch11]") {
  // fp16 gradients of 1000 · loss; masters at 0 and SGD at lr 1, so each
  // master ends as −(its unscaled gradient), bit for bit. g / 1000 and
  // g · (1/1000) differ in the last bit for some of these (5 and −999 do);
  // the contract accepts either: within 1 ulp of the quotient.
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
      INFO("master " << at << " after one SGD step of lr 1 from 0 should be −(" << g << " / 1000) = " << -quotient
                     << " (to 1 ulp, " << ulp << "), is " << got[at]
                     << (std::fabs(got[at] + g) <= std::fabs(g) * 1e-6f ? ": the gradient was not divided by the scale"
                         : std::fabs(got[at] + quotient) > 1e-3f * std::fabs(quotient)
                             ? ": not the gradient of the loss — scale · loss's gradient divided by the scale"
                             : ""));
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
         << (master > 0.99f + 1e-6f ? ": the updates did not add up in fp32 — was the step made on the 16-bit weight, "
                                      "or the master restarted from it?"
                                    : ""));
    CHECK(std::fabs(master - 0.99f) <= 1e-6f);
  }
  INFO("the bf16 weight must be the master rounded to bf16: 0.99 -> 0.98828125 (= 253 * 2^-8), got " << weight);
  CHECK(weight == 0.98828125f);
}

TEST_CASE("master_step: skips a step with an inf or NaN gradient, every bit kept", "[ch11]") {
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    INFO("the bad gradient entry is " << bad);
    auto fresh = [] { return make_pair_of({{0.5f, -1.0f}, {0.25f, 0.75f, 2.0f}}); };
    const std::vector<std::vector<float>> g1 = {{0.5f, 1.0f}, {-2.0f, 0.25f, 1.0f}}, g2 = {{1.0f, -1.0f}, {0.5f, 0.5f, -0.25f}};
    // The reference: two good Adam steps.
    Pair ref = fresh();
    Adam ref_opt(ref.masters, 0.01f);
    set_grads(ref.params, g1);
    master_step(ref.params, ref.masters, ref_opt, 2.0f, Precision::FP16);
    set_grads(ref.params, g2);
    master_step(ref.params, ref.masters, ref_opt, 2.0f, Precision::FP16);
    // Yours: good, overflowed, good.
    Pair p = fresh();
    Adam opt(p.masters, 0.01f);
    set_grads(p.params, g1);
    REQUIRE(master_step(p.params, p.masters, opt, 2.0f, Precision::FP16));
    const std::vector<float> w0 = all_bits(p.params), m0 = all_bits(p.masters), s0 = all_bits(opt.state_tensors());
    set_grads(p.params, {{1.0f, 1.0f}, {1.0f, 1.0f, bad}});  // the last entry: finite ones come first
    const bool stepped = master_step(p.params, p.masters, opt, 2.0f, Precision::FP16);
    {
      INFO("master_step must return false for a step whose gradients overflowed");
      CHECK_FALSE(stepped);
    }
    {
      INFO("a skipped step must leave the 16-bit weights bit-identical");
      CHECK(same_bits(w0, all_bits(p.params)));
    }
    {
      INFO("a skipped step must leave the fp32 masters bit-identical (no update from the finite entries either)");
      CHECK(same_bits(m0, all_bits(p.masters)));
    }
    {
      INFO("a skipped step must leave Adam's moments bit-identical");
      CHECK(same_bits(s0, all_bits(opt.state_tensors())));
    }
    set_grads(p.params, g2);
    REQUIRE(master_step(p.params, p.masters, opt, 2.0f, Precision::FP16));
    INFO("good, overflowed, good must end where good, good ends, bit for bit: the skipped step must not count as an "
         "optimizer step (Adam's bias correction counts steps)");
    CHECK(same_bits(all_bits(ref.masters), all_bits(p.masters)));
    CHECK(same_bits(all_bits(ref.params), all_bits(p.params)));
  }
}
