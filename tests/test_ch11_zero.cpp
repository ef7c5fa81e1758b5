// test_ch11_zero.cpp — mixed precision under ZeRO (zero_mixed.h): every
// rank's model states on the device ledger equal 2 + 2 + 12 bytes per
// parameter divided as each stage divides them, at 2 and 4 ranks, with the
// expected bytes written out here (no zero_formula.h); a formula that counts
// the master weights in 16 bits fails the verdict that names them.
#include "support/catch.h"
#include <string>

#include "dpt/data.h"
#include "dpt/options.h"
#include "dpt/verdict.h"
#include "mixed_training.h"
#include "zero_mixed.h"

using namespace dpt;
using namespace dpt::ch11;

namespace {
Options small_options() {
  Options o;
  o.model = "20-9-5", o.optimizer = "adam", o.lr = 1e-3f, o.batch = 8, o.seed = 3;  // Ψ = 239: odd, padded
  return o;
}
Setting fp16_dynamic() { return {Precision::FP16, parse_loss_scale("dynamic", 50), "dynamic"}; }
}  // namespace

TEST_CASE("ch11 ZeRO: each rank holds 2+2+12 bytes per parameter, divided as its stage divides them", "[ch11][hole:master_step]") {
  const Options o = small_options();
  const Dataset data = make_synthetic(64, 20, 5, 3);
  for (int world : {2, 4}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const ZeroMixedRun run = train_zero_mixed(o, data, fp16_dynamic(), stage, world);
      const double psi = 20 * 9 + 9 + 9 * 5 + 5, shard = (239 + world - 1) / world;  // S = ⌈Ψ/N⌉
      REQUIRE(run.psi == 239);
      REQUIRE(run.shard == int64_t(shard));
      REQUIRE(run.steps_taken == 2);
      for (int r = 0; r < world; ++r) {
        INFO("stage " << stage << ", rank " << r << " of " << world);
        const StateBytes& m = run.measured[std::size_t(r)];
        CHECK(m.params == 2 * (stage == 3 ? shard : psi));   // fp16 weights: divided at stage 3
        CHECK(m.grads == 2 * (stage >= 2 ? shard : psi));    // fp16 gradients: from stage 2
        CHECK(m.state == 12 * (stage >= 1 ? shard : psi));   // fp32 master, m, v: from stage 1
      }
    }
  }
}

TEST_CASE("ch11 ZeRO: the verdicts hold at every stage, and masters counted in 16 bits fail naming them", "[ch11][hole:master_step]") {
  const Options o = small_options();
  const Dataset data = make_synthetic(64, 20, 5, 3);
  std::vector<ZeroMixedRun> runs;
  for (int stage = 0; stage <= 3; ++stage) runs.push_back(train_zero_mixed(o, data, fp16_dynamic(), stage, 4));
  Verdicts right;
  report_zero_memory(runs, {2, 2, 12}, Precision::FP16, Narrator(false), right);
  CHECK(right.all_passed());
  Verdicts masters_in_16_bits;  // the master copy at 2 bytes: 2 + 2 + (2 + 8)
  report_zero_memory(runs, {2, 2, 10}, Precision::FP16, Narrator(false), masters_in_16_bits);
  int failed = 0;
  for (const Verdict& v : masters_in_16_bits.all()) {
    if (v.passed) continue;
    ++failed;
    INFO(v.what);
    CHECK(v.what.find("optimizer state (fp32 master + moments) per rank") != std::string::npos);
  }
  CHECK(failed == 4);  // one per stage, and only the optimizer state's
}
