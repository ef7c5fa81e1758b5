// test_batch_sweep.cpp — the harness's batch sweep (dpt/batch_sweep.h; chapter
// 02's MLP and chapter 14's GPT run it): its bookkeeping on made-up curves and
// on a small synthetic training run, the critical-batch rule on curves with a
// known knee, its verdicts failing where the curve says they must, the grid
// search on a made-up rate response, and the plot's points in the SVG.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "dpt/batch_sweep.h"
#include "dpt/data.h"
#include "dpt/evaluate.h"
#include "dpt/ops.h"
#include "dpt/optim.h"

using namespace dpt;

namespace {
// An accuracy target, as chapter 02 aims at one; a loss target, as chapter 14.
SweepTarget accuracy_target(double value) { return {value, true, "--target-accuracy", 100, 1, "%"}; }
SweepTarget loss_target(double value) { return {value, false, "--target-bits", 1, 3, " bits"}; }
}  // namespace

TEST_CASE("batch sweep: evaluated after every step to 16, then at most ~9 % apart, ending at the cap", "[sweep]") {
  for (int64_t cap : {1, 7, 16, 17, 100, 3000}) {
    const std::vector<int64_t> at = evaluation_steps(cap);
    INFO("cap " << cap);
    REQUIRE(!at.empty());
    CHECK(at.back() == cap);
    for (std::size_t i = 0; i < at.size(); ++i) {
      if (at[i] <= 16) CHECK(at[i] == int64_t(i) + 1);
      if (i > 0) {
        CHECK(at[i] > at[i - 1]);
        CHECK(double(at[i]) <= std::ceil(1.0905 * double(at[i - 1])));  // 2^(1/8) = 1.0905
      }
    }
  }
  CHECK(evaluation_steps(3000).size() < 80);  // a long run is scored ~70 times, not 3000
}

TEST_CASE("batch sweep: steps to target is the first evaluated step at the target, and the run stops there", "[sweep]") {
  int64_t taken = 0;
  std::vector<int64_t> scored_at;
  auto step = [&] { return 2.0 - 0.001 * double(++taken); };  // a falling loss
  auto accuracy = [&] { scored_at.push_back(taken); return double(taken) / 1000; };  // reaches 0.1 at step 100
  const TargetRun run = run_to_target(step, accuracy, accuracy_target(0.1), 3000);
  CHECK(run.reached());
  CHECK_FALSE(run.diverged);
  CHECK(run.steps >= 100);
  CHECK(double(run.steps) <= std::ceil(1.0905 * 100));  // the next evaluation after the crossing
  CHECK(run.steps_taken == run.steps);
  CHECK(taken == run.steps);
  CHECK(scored_at.back() == run.steps);
  for (std::size_t i = 0; i + 1 < scored_at.size(); ++i) CHECK(scored_at[i] < 100);  // each earlier score was below
}

TEST_CASE("batch sweep: the linear rule ramps from the reference rate to reference x B/8 over the warm-up samples",
          "[sweep]") {
  // B = 256 is 32x the smallest batch; 16384 warm-up samples are 64 of its steps.
  CHECK(linear_rule_lr(0.025f, 8, 256, 16384, 0) == 0.025f);
  CHECK(linear_rule_lr(0.025f, 8, 256, 16384, 64) == Approx(0.8f));
  CHECK(linear_rule_lr(0.025f, 8, 256, 16384, 500) == Approx(0.8f));
  CHECK(linear_rule_lr(0.025f, 8, 256, 16384, 32) == Approx(0.025f + (0.8f - 0.025f) / 2));  // half-way in samples
  for (int64_t step = 1; step <= 64; ++step)
    CHECK(linear_rule_lr(0.025f, 8, 256, 16384, step) > linear_rule_lr(0.025f, 8, 256, 16384, step - 1));
  CHECK(linear_rule_lr(0.025f, 8, 256, 0, 0) == Approx(0.8f));   // no warm-up: the scaled rate at once
  CHECK(linear_rule_lr(0.025f, 8, 8, 16384, 0) == 0.025f);       // the smallest batch is its own reference
  CHECK(linear_rule_lr(0.025f, 8, 8, 16384, 3000) == 0.025f);
  CHECK(linear_rule_lr(0.001f, 4, 64, 0, 0) == Approx(0.016f));  // another reference batch: x B/4
  CHECK(linear_rule_lr(0.001f, 4, 64, 1024, 8) == Approx(0.001f + 0.015f / 2));  // 512 of 1024 samples
}

TEST_CASE("batch sweep: a loss target is reached at or below it, and the run stops at the first evaluation there",
          "[sweep]") {
  int64_t taken = 0;
  auto step = [&] { return 4.0 / double(++taken); };
  auto bits = [&] { return 4.0 - 0.01 * double(taken); };  // 3.0 after 100 steps
  const TargetRun run = run_to_target(step, bits, loss_target(3.0), 3000);
  CHECK(run.reached());
  CHECK(run.steps >= 100);
  CHECK(double(run.steps) <= std::ceil(1.0905 * 100));
  CHECK(run.score <= 3.0);
  CHECK(loss_target(3.0).show(2.5) == "2.500 bits");
  CHECK(accuracy_target(0.8).show(0.755) == "75.5%");
}

TEST_CASE("batch sweep: a run that never reaches the target stops at the cap, unreached", "[sweep]") {
  int64_t taken = 0;
  const TargetRun run = run_to_target([&] { ++taken; return 1.0; }, [] { return 0.5; }, accuracy_target(0.9), 250);
  CHECK_FALSE(run.reached());
  CHECK_FALSE(run.diverged);
  CHECK(run.steps_taken == 250);
  CHECK(taken == 250);
  CHECK(run.score == 0.5);
}

TEST_CASE("batch sweep: a loss past 10x the first, or not a number, is divergence and stops the run", "[sweep]") {
  for (double bad : {23.5, double(NAN), double(INFINITY)}) {
    int64_t taken = 0;
    auto step = [&] { return ++taken < 40 ? 2.3 : bad; };
    const TargetRun run = run_to_target(step, [] { return 0.0; }, accuracy_target(0.5), 1000);
    INFO("loss " << bad);
    CHECK(run.diverged);
    CHECK_FALSE(run.reached());
    CHECK(run.steps_taken == 40);
  }
  int64_t taken = 0;  // 9x the first is a bad step, not divergence
  const TargetRun run = run_to_target([&] { return ++taken == 5 ? 20.0 : 2.3; }, [] { return 0.0; }, accuracy_target(0.5), 50);
  CHECK_FALSE(run.diverged);
  CHECK(run.steps_taken == 50);
}

namespace {
// The test's own training loop: batches of 16 in order, plain SGD at 0.2, from seed 3.
struct OwnRun {
  const Dataset& data;
  Rng rng{3};
  MLP model{{8, 16, 3}, Device::host(), rng};
  std::unique_ptr<Optimizer> opt = make_optimizer("sgd", model.parameters(), 0.2f);
  BatchSampler sampler{data.size(), 16, false, 1};
  int64_t steps = 0;
  explicit OwnRun(const Dataset& d) : data(d) {}
  double step() {
    Batch b = gather_batch(data, sampler.indices(steps++), Device::host());
    opt->zero_grad();
    Tensor loss = softmax_cross_entropy(model.forward(b.x), b.y);
    loss.backward();
    opt->step();
    return loss.item();
  }
};
}  // namespace

TEST_CASE("batch sweep: on a small synthetic problem, the steps found are where a replay first scores the target",
          "[sweep]") {
  const Dataset data = make_synthetic(512, 8, 3, 11);
  const Dataset held = make_synthetic_held_out(data, 256, 11);
  const double target = 0.6;
  OwnRun trained(data), replay(data);
  const TargetRun run = run_to_target([&] { return trained.step(); }, [&] { return evaluate(trained.model, held).accuracy; },
                                      accuracy_target(target), 2000);
  REQUIRE(run.reached());

  // The replay: the same run, scored after every step.
  std::vector<double> accuracy_after(1, 0.0);  // [s]: after s steps
  for (int64_t s = 1; s <= run.steps; ++s) replay.step(), accuracy_after.push_back(evaluate(replay.model, held).accuracy);
  CHECK(accuracy_after[run.steps] >= target);
  CHECK(accuracy_after[run.steps] == run.score);
  int64_t first = 1;
  while (accuracy_after[first] < target) ++first;
  CHECK(run.steps >= first);
  for (int64_t s : evaluation_steps(2000))  // every evaluation before the one that stopped it scored below
    if (s < run.steps) CHECK(accuracy_after[s] < target);
}

namespace {
// A made-up sweep curve: steps(B) for B = 8 … 4096.
std::vector<SweepPoint> curve(const std::function<double(double)>& steps) {
  std::vector<SweepPoint> points;
  for (int64_t b = 8; b <= 4096; b *= 2) {
    SweepPoint p;
    p.batch = b, p.tuned_steps = int64_t(std::lround(steps(double(b)))), p.tuned_lr = 0.1f;
    p.linear_steps = p.tuned_steps, p.linear_lr = 0.1f * float(b / 8);
    points.push_back(p);
  }
  return points;
}
}  // namespace

TEST_CASE("batch sweep: the critical batch of a curve with a sharp knee is the knee", "[sweep]") {
  // Doubling halves the steps up to B = 256 (samples 8192 each), then 32 steps flat.
  const Knee k = critical_batch(curve([](double b) { return std::max(8192 / b, 32.0); }));
  CHECK(k.min_steps == 32);
  CHECK(k.min_samples == 8192);
  CHECK(k.critical_batch == 256);
}

TEST_CASE("batch sweep: on the noise-scale model S = S_min (1 + B_noise/B), the critical batch is B_noise", "[sweep]") {
  for (double noise : {64.0, 256.0, 512.0}) {
    const Knee k = critical_batch(curve([&](double b) { return 1000 * (1 + noise / b); }));
    // The sweep's ends bias it by (1 + 8/B_noise)(1 + B_noise/4096) at most (and rounding the steps).
    const double bias = (1 + 8 / noise) * (1 + noise / 4096) * 1.01;
    INFO("B_noise " << noise << ", found " << k.critical_batch);
    CHECK(k.critical_batch >= noise / bias);
    CHECK(k.critical_batch <= noise * bias);
  }
}

TEST_CASE("batch sweep: unreached batches are left out of the knee, and fewer than two reached give none", "[sweep]") {
  std::vector<SweepPoint> points = curve([](double b) { return std::max(8192 / b, 32.0); });
  points[0].tuned_steps = -1;  // B = 8 not reached: E_min from the others, the same 8192
  CHECK(critical_batch(points).critical_batch == 256);
  for (std::size_t i = 1; i < points.size(); ++i) points[i].tuned_steps = -1;
  CHECK(critical_batch(points).critical_batch == 0);
}

namespace {
SweepResult sweep_of(std::vector<SweepPoint> points) {
  SweepResult s;
  s.points = std::move(points);
  s.knee = critical_batch(s.points);
  s.reference_lr = 0.1f;
  return s;
}
SweepSettings accuracy_settings() {
  SweepSettings s;
  s.target = accuracy_target(0.8);
  return s;
}
}  // namespace

TEST_CASE("batch sweep: its verdict passes on a curve that halves its steps below the knee, fails where it does not",
          "[sweep]") {
  Verdicts good;
  add_sweep_verdicts(good, sweep_of(curve([](double b) { return 1000 * (1 + 256 / b); })), accuracy_settings());
  CHECK(good.all_passed());
  CHECK(good.vacuous() == 0);

  // Doubling B from 8 to 32 buys nothing (samples x4), then halving resumes: the check must see it.
  Verdicts flat;
  add_sweep_verdicts(flat, sweep_of(curve([](double b) { return b <= 32 ? 1024.0 : std::max(32768 / b, 16.0); })), accuracy_settings());
  CHECK(flat.failures() == 1);
  CHECK(flat.all()[0].what.find("below the critical batch") != std::string::npos);

  // A batch below the knee that never reached the target is the worst case there, not a batch to skip.
  std::vector<SweepPoint> gap = curve([](double b) { return 1000 * (1 + 256 / b); });
  gap[1].tuned_steps = -1;  // B = 16
  Verdicts missing;
  add_sweep_verdicts(missing, sweep_of(gap), accuracy_settings());
  CHECK(missing.failures() == 1);
}

TEST_CASE("batch sweep: its verdict lets the linear rule diverge, but not stall short of the target", "[sweep]") {
  std::vector<SweepPoint> points = curve([](double b) { return 1000 * (1 + 256 / b); });
  points.back().linear_steps = -1, points.back().linear_diverged = true;
  Verdicts diverged;
  add_sweep_verdicts(diverged, sweep_of(points), accuracy_settings());
  CHECK(diverged.all_passed());
  points[5].linear_steps = -1;  // B = 256: neither reached nor diverged
  points[5].linear_end.steps_taken = 900, points[5].linear_end.score = 0.7;
  Verdicts stalled;
  add_sweep_verdicts(stalled, sweep_of(points), accuracy_settings());
  CHECK(stalled.failures() == 1);
  CHECK(stalled.all().back().why.find("neither reached nor diverged at B = 256 (70.0% after 900 steps") != std::string::npos);
}

TEST_CASE("batch sweep: a label starts every verdict's line, passing or failing, so sweeps side by side are told apart",
          "[sweep]") {
  Verdicts passing, failing;
  add_sweep_verdicts(passing, sweep_of(curve([](double b) { return 1000 * (1 + 256 / b); })), accuracy_settings(), "lars: ");
  std::vector<SweepPoint> none = curve([](double b) { return 1000 * (1 + 256 / b); });
  for (SweepPoint& p : none) p.tuned_steps = -1;
  add_sweep_verdicts(failing, sweep_of(none), accuracy_settings(), "lamb: ");
  REQUIRE(passing.all().size() >= 2);
  REQUIRE(failing.failures() >= 1);
  for (const Verdict& v : passing.all()) CHECK(v.what.rfind("lars: ", 0) == 0);
  for (const Verdict& v : failing.all()) CHECK(v.what.rfind("lamb: ", 0) == 0);
}

TEST_CASE("batch sweep: its plot has one marker per reached run, on log-log axes", "[sweep]") {
  std::vector<SweepPoint> points = curve([](double b) { return 1000 * (1 + 256 / b); });
  points[2].tuned_steps = -1;                                            // B = 32: no tuned marker
  points.back().linear_steps = -1, points.back().linear_diverged = true;  // B = 4096: named in the note
  const std::string svg = dpt::svg(sweep_chart(sweep_of(points), "test"));
  const std::regex marker("<circle class=\"marker\" data-series=\"tuned per batch\" data-x=\"([0-9.e+-]+)\" "
                          "data-y=\"([0-9.e+-]+)\" cx=\"([0-9.e+-]+)\" cy=\"([0-9.e+-]+)\"");
  std::map<int64_t, std::pair<double, double>> at;  // batch -> (x, y) in pixels
  for (auto m = std::sregex_iterator(svg.begin(), svg.end(), marker); m != std::sregex_iterator(); ++m) {
    const int64_t b = std::llround(std::stod((*m)[1]));
    at[b] = {std::stod((*m)[3]), std::stod((*m)[4])};
    for (const SweepPoint& p : points)
      if (p.batch == b) CHECK(std::llround(std::stod((*m)[2])) == p.tuned_steps);
  }
  CHECK(at.size() == points.size() - 1);
  CHECK(at.count(32) == 0);
  // x: each doubling the same distance; y: distance proportional to log(steps ratio), down for fewer steps.
  const double per_doubling = at[16].first - at[8].first;
  CHECK(per_doubling > 0);
  const double per_e = (at[4096].second - at[8].second) /
                       std::log(double(points.front().tuned_steps) / double(points.back().tuned_steps));
  CHECK(per_e > 0);
  for (const auto& [b, xy] : at) {
    const SweepPoint& p = *std::find_if(points.begin(), points.end(), [&](const SweepPoint& q) { return q.batch == b; });
    CHECK(xy.first - at[8].first == Approx(per_doubling * std::log2(double(b) / 8)).margin(1e-3));
    CHECK(xy.second - at[8].second ==
          Approx(per_e * std::log(double(points.front().tuned_steps) / double(p.tuned_steps))).margin(1e-3));
  }
  CHECK(svg.find("The linear rule diverged at B = 4096.") != std::string::npos);
  CHECK(svg.find("perfect scaling E_min/B") != std::string::npos);
  CHECK(svg.find("floor S_min") != std::string::npos);
  // The shaded region ends at the critical batch, between the markers of the batches around it.
  std::smatch band;
  REQUIRE(std::regex_search(svg, band, std::regex("class=\"band\" data-x-hi=\"([0-9.e+-]+)\" x=\"([0-9.e+-]+)\" "
                                                  "y=\"[0-9.e+-]+\" width=\"([0-9.e+-]+)\"")));
  const double k = critical_batch(points).critical_batch;
  CHECK(std::stod(band[1]) == Approx(k).epsilon(1e-4));
  const double edge = std::stod(band[2]) + std::stod(band[3]);
  CHECK(edge > at[int64_t(std::exp2(std::floor(std::log2(k))))].first);
  CHECK(edge < at[int64_t(std::exp2(std::ceil(std::log2(k))))].first);
}

namespace {
// A made-up response to the rate: at batch B the best rate is 0.0125·B/8 up
// to 0.2 (then flat), each doubling away from it costs 1.5x the steps, and a
// rate above 0.8 diverges. Steps at the best rate: 1000·(1 + 64/B).
TargetRun made_up_run(int64_t batch, float lr, int64_t max_steps) {
  const double best_lr = std::min(0.2, 0.0125 * double(batch) / 8);
  TargetRun run;
  if (lr > 0.8f) {
    run.diverged = true, run.steps_taken = 3;
    return run;
  }
  const double steps = 1000 * (1 + 64.0 / double(batch)) * std::pow(1.5, std::abs(std::log2(double(lr) / best_lr)));
  run.steps_taken = std::min<int64_t>(max_steps, std::llround(steps));
  if (std::llround(steps) <= max_steps) run.steps = run.steps_taken;
  run.score = 0.8 * double(run.steps_taken) / steps;  // the fraction of the way there, for a run stopped early
  return run;
}
}  // namespace

TEST_CASE("batch sweep: the grid search finds each batch's best rate, from a start that does not reach the target",
          "[sweep]") {
  SweepSettings settings = accuracy_settings();
  settings.min_batch = 8, settings.max_batch = 256, settings.max_steps = 20000;
  settings.grid = doubling_grid(0.0125f, 9);  // 0.0125 ... 3.2
  settings.first_rate = 8;                    // 3.2: diverges; the search must walk down from there
  settings.warmup_samples = 0;                // the linear rule at its scaled rate from the first step
  std::vector<int64_t> asked_batches;
  auto train = [&](int64_t batch, const std::function<float(int64_t)>& lr_at, int64_t max_steps) {
    CHECK(lr_at(0) == lr_at(1000));  // no warm-up: every run holds its rate
    asked_batches.push_back(batch);
    return made_up_run(batch, lr_at(max_steps), max_steps);
  };
  std::vector<int64_t> best_calls;
  const SweepResult sweep = run_batch_sweep(settings, train, Narrator(false), [&](int64_t b) { best_calls.push_back(b); });
  REQUIRE(sweep.points.size() == 6);
  for (const SweepPoint& p : sweep.points) {
    INFO("B = " << p.batch);
    const double best_lr = std::min(0.2, 0.0125 * double(p.batch) / 8);
    CHECK(p.tuned_lr == Approx(best_lr));
    CHECK(p.tuned_steps == std::llround(1000 * (1 + 64.0 / double(p.batch))));
    CHECK(std::count(best_calls.begin(), best_calls.end(), p.batch) >= 1);
  }
  CHECK(sweep.reference_lr == Approx(0.0125f));
  CHECK(sweep.knee.critical_batch == Approx(9000.0 * 8 / 1250).epsilon(1e-3));  // E_min at B = 8, S_min at 256
}
