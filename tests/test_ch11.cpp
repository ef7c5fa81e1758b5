// test_ch11.cpp — chapter 11's holes. update_loss_scale against ch11.h's
// laws, each evaluated on the trace of scales it produced (scripted and
// pseudo-random sequences of clean and overflowed steps), and GradScaler's
// default settings; that the laws' one sequence is GradScaler's own is
// tests/pytorch/crosscheck_ch11.py's part (label pytorch).
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
#include <random>
#include <string>

#include "ch11.h"
#include "dpt/optim.h"

using namespace dpt;
using namespace dpt::ch11;

// ----------------------------------------------------------------------------
// update_loss_scale

namespace {
// Runs a scaler from `start` over `events` ('C' clean, 'O' overflowed) and
// checks ch11.h's laws after every call, on the trace so far: S[t] is the
// scale after call t, S[0] the start.
void check_laws(LossScaler scaler, const std::string& events) {
  const int64_t n = scaler.growth_interval;
  const float up = scaler.growth_factor, down = scaler.backoff_factor;
  std::vector<float> S = {scaler.scale};
  for (std::size_t t = 1; t <= events.size(); ++t) {
    const bool overflowed = events[t - 1] == 'O';
    update_loss_scale(scaler, overflowed);
    S.push_back(scaler.scale);
    const float before = S[t - 1], after = S[t];
    // The window of the last n steps, t − n + 1 … t: all clean, and the scale unchanged by all but the last?
    bool evidence = int64_t(t) >= n;
    for (int64_t j = int64_t(t) - n + 1; evidence && j <= int64_t(t); ++j)
      evidence = events[std::size_t(j - 1)] == 'C' && (j == int64_t(t) || S[std::size_t(j)] == S[std::size_t(j - 1)]);
    const std::size_t from = t > std::size_t(n) + 2 ? t - std::size_t(n) - 2 : 0;
    INFO("call " << t << " (" << (overflowed ? "overflowed" : "clean") << "), growth_interval " << n << ": the scale went from "
                 << before << " to " << after << "; the last steps' events " << events.substr(from, t - from));
    {
      INFO("law: the scale is finite");
      REQUIRE(std::isfinite(after));
    }
    {
      INFO("law: the scale only moves by its factors (x" << up << " or x" << down << ")");
      REQUIRE((after == before || after == before * up || after == before * down));
    }
    if (overflowed) {
      INFO("law: an overflow shrinks the scale, to " << before * down);
      REQUIRE(after == before * down);
      continue;
    }
    {
      INFO("law: a clean step never shrinks the scale");
      REQUIRE(after >= before);
    }
    if (after > before) {
      INFO("law: it grows only on evidence — " << n << " clean steps in a row, none before this one changing the "
                                                 "scale — and here there was not (an overflow or a change of scale "
                                                 "among them, or fewer steps)");
      REQUIRE(evidence);
    } else if (evidence && std::isfinite(before * up)) {
      INFO("law: it does not wait longer than the evidence needs — the last " << n << " steps were clean and none "
           "before this one changed the scale, so the scale must grow to " << before * up);
      REQUIRE(after == before * up);
    }
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
  // Runs of 3 clean steps, an overflow after 2 clean ones, one after 1, two in a row, runs longer than 3.
  check_laws(s, "CCCCOCCOOCCCCCCCOCOCCCCCCCCOCCC");
}

TEST_CASE("update_loss_scale: keeps its laws on pseudo-random runs", "[ch11]") {
  for (int64_t interval : {1, 2, 3, 7})
    for (double p : {0.05, 0.3, 0.5})
      for (unsigned seed : {1u, 2u, 3u}) {
        LossScaler s;
        s.scale = 65536, s.growth_interval = interval;
        const std::string events = random_events(seed * 100 + unsigned(interval), 200, p);
        check_laws(s, events);
        // What the laws add up to: with factors 2 and 1/2, the scale is the start times a power of two.
        LossScaler again;
        again.scale = 65536, again.growth_interval = interval;
        for (char e : events) update_loss_scale(again, e == 'O');
        int exponent = 0;
        INFO("law: with growth x2 and backoff x0.5 the scale stays 65536 times a power of two, got " << again.scale);
        CHECK(std::frexp(again.scale / 65536.0f, &exponent) == 0.5f);
      }
}

TEST_CASE("update_loss_scale: never grows the scale to infinity", "[ch11]") {
  LossScaler s;
  s.scale = 0x1p127f, s.growth_interval = 1;  // x2 would be 2^128: inf in float
  update_loss_scale(s, false);
  INFO("2^127 x 2 is not a float: the scale must stay 2^127 (GradScaler keeps it when the grown one is not finite), got "
       << s.scale);
  CHECK(s.scale == 0x1p127f);
  LossScaler near;
  near.scale = 0x1p126f, near.growth_interval = 2;
  check_laws(near, "CCCCCCOCCCCOOCCC");  // up to 2^127, held there, down and up again
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
  // PyTorch's documented defaults: init_scale 2^16, growth_factor 2.0, backoff_factor 0.5, growth_interval 2000.
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
