// test_ch02_compare.cpp — chapter 02's optimizer comparison (provided code,
// sweep_compare.h) on made-up sweeps: which batches count as past the plain
// optimizer, the verdicts passing where the curves say so and failing where
// they do not, the side-by-side table, and the list flag's refusals.
#include "support/catch.h"

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "sweep_compare.h"

using namespace dpt;
using namespace dpt::ch02;

namespace {
// A made-up sweep: tuned steps(B) for B = 8 … 4096; the linear rule reaches
// the target in the tuned steps below `diverges_from` and diverges from it on.
SweepResult made_up(const std::function<double(double)>& steps, int64_t diverges_from = 1 << 30) {
  SweepResult s;
  for (int64_t b = 8; b <= 4096; b *= 2) {
    SweepPoint p;
    p.batch = b, p.tuned_steps = int64_t(std::lround(steps(double(b)))), p.tuned_lr = 0.1f;
    p.linear_diverged = b >= diverges_from;
    p.linear_steps = p.linear_diverged ? -1 : p.tuned_steps;
    s.points.push_back(p);
  }
  s.knee = critical_batch(s.points);
  s.reference_lr = 0.1f;
  return s;
}
// Doubling halves the steps up to `knee`, then the steps stay at their floor.
std::function<double(double)> sharp(double knee) {
  return [knee](double b) { return std::max(32 * knee / b, 32.0); };
}
}  // namespace

TEST_CASE("comparison: the batches past the plain optimizer are those past its knee or where its linear rule diverged",
          "[ch02]") {
  CHECK(batches_past_plain(made_up(sharp(256))) == std::vector<int64_t>{512, 1024, 2048, 4096});
  CHECK(batches_past_plain(made_up(sharp(4096), 2048)) == std::vector<int64_t>{2048, 4096});  // knee at the last batch
  CHECK(batches_past_plain(made_up(sharp(64), 32)) ==
        std::vector<int64_t>{32, 64, 128, 256, 512, 1024, 2048, 4096});  // 32 and 64 by divergence alone
  SweepResult none = made_up(sharp(256));  // no knee (one batch reached), no divergence: nothing is past it
  for (std::size_t i = 1; i < none.points.size(); ++i) none.points[i].tuned_steps = -1;
  none.knee = critical_batch(none.points);
  CHECK(batches_past_plain(none).empty());
}

TEST_CASE("comparison: a layer-wise curve that reaches every batch past the plain one, knee 4x later, passes", "[ch02]") {
  Verdicts v;
  add_comparison_verdicts(v, {{"sgd", made_up(sharp(128), 512)}, {"lars", made_up(sharp(512), 256)}});
  CHECK(v.all_passed());
  CHECK(v.vacuous() == 0);
  REQUIRE(v.all().size() == 2);
  CHECK(v.all()[0].what.find("lars's tuned run reaches the target at every batch past sgd") != std::string::npos);
  CHECK(v.all()[1].what.find("lars's critical batch / sgd's") != std::string::npos);
}

TEST_CASE("comparison: a batch past the plain one that the layer-wise run did not reach fails, named", "[ch02]") {
  SweepResult lamb = made_up(sharp(1024));
  lamb.points.back().tuned_steps = -1;  // B = 4096
  lamb.knee = critical_batch(lamb.points);
  Verdicts v;
  add_comparison_verdicts(v, {{"sgd", made_up(sharp(128), 512)}, {"lamb", lamb}});
  CHECK(v.failures() == 1);
  CHECK(v.all()[0].why.find("not reached at B = 4096") != std::string::npos);
}

TEST_CASE("comparison: a knee that moved less than one doubling fails, and so does a missing knee", "[ch02]") {
  Verdicts same;
  add_comparison_verdicts(same, {{"sgd", made_up(sharp(128))}, {"lars", made_up(sharp(181))}});  // 1.4x
  CHECK(same.failures() == 1);
  CHECK(same.all()[1].what.find("critical batch") != std::string::npos);
  Verdicts shifted;
  add_comparison_verdicts(shifted, {{"sgd", made_up(sharp(128))}, {"lars", made_up(sharp(256))}});  // exactly 2x
  CHECK(shifted.all_passed());
  SweepResult unreached = made_up(sharp(512));
  for (SweepPoint& p : unreached.points) p.tuned_steps = -1;
  unreached.knee = critical_batch(unreached.points);
  Verdicts none;
  add_comparison_verdicts(none, {{"sgd", made_up(sharp(128))}, {"lamb", unreached}});
  CHECK(none.failures() == 2);  // reached no batch past sgd, and has no knee
}

TEST_CASE("comparison: with no batch past the plain one the reach verdict cannot fail, and says so", "[ch02]") {
  Verdicts v;
  add_comparison_verdicts(v, {{"sgd", made_up(sharp(4096))}, {"lars", made_up(sharp(4096))}});
  CHECK(v.vacuous() == 1);
  CHECK(v.failures() == 1);  // the knee did not move
}

TEST_CASE("comparison: the table has a column group per optimizer and marks the batches past the plain one", "[ch02]") {
  const std::string text = comparison_table({{"sgd", made_up(sharp(128), 1024)}, {"lamb", made_up(sharp(512))}});
  for (const char* header : {"sgd steps", "sgd lr", "sgd linear", "lamb steps", "lamb lr", "lamb linear"})
    CHECK(text.find(header) != std::string::npos);
  CHECK(text.find("\n 128 ") != std::string::npos);  // the knee itself is not past it
  CHECK(text.find(" 128*") == std::string::npos);
  CHECK(text.find(" 256*") != std::string::npos);
  CHECK(text.find(" 4096*") != std::string::npos);
  CHECK(text.find("div") != std::string::npos);                  // sgd's linear rule from 1024
  CHECK(text.find("sgd: S_min = 32 steps") != std::string::npos);
  CHECK(text.find("lamb: S_min = 32 steps, E_min = 1.638e+04 samples, critical batch 512") != std::string::npos);
}

TEST_CASE("comparison: --sweep-optimizers takes two or more names that have a grid, none twice", "[ch02]") {
  CHECK(parse_sweep_optimizers("sgd,lars,lamb") == std::vector<std::string>{"sgd", "lars", "lamb"});
  CHECK(parse_sweep_optimizers("momentum,lamb") == std::vector<std::string>{"momentum", "lamb"});
  CHECK_THROWS_AS(parse_sweep_optimizers("sgd"), CLI::ValidationError);
  CHECK_THROWS_AS(parse_sweep_optimizers("sgd,adam"), CLI::ValidationError);
  CHECK_THROWS_AS(parse_sweep_optimizers("sgd,lars,sgd"), CLI::ValidationError);
  CHECK_THROWS_AS(parse_sweep_optimizers("sgd,,lars"), CLI::ValidationError);
}
