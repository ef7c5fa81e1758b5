// test_rank_agreement.cpp — check_ranks_agree on thread ranks whose Options
// or data differ, and (once wired into the chapters) a real mpirun run whose
// processes were given different flags.
#include "support/catch.h"

#include <map>
#include <mutex>

#include "dpt/comm.h"
#include "dpt/options.h"
#include "support/ranks.h"
#include "support/run_program.h"

using namespace dpt;

namespace {
Options agreement_options() {
  Options o;
  o.model = "6-4-3";
  o.samples = 40;
  return o;
}

// Runs check_ranks_agree on `world` thread ranks, rank r with options_of(r) and
// data_of(r); returns each rank's error message ("" if it passed).
std::vector<std::string> agree(int world, const std::function<Options(int)>& options_of,
                               const std::function<Dataset(int)>& data_of) {
  std::vector<std::string> messages(world);
  dpt_test::run_ranks(world, [&](Context& ctx) {
    Options o = options_of(ctx.rank);
    Dataset data = data_of(ctx.rank);
    try {
      check_ranks_agree(ctx.comm, o, data);
    } catch (const Error& e) {
      messages[ctx.rank] = e.what();
    }
  });
  return messages;
}

Dataset data_for(const Options& o) { return load_dataset(o); }
}  // namespace

TEST_CASE("ranks with the same flags and data pass the agreement check", "[agree]") {
  Options o = agreement_options();
  auto messages = agree(3, [&](int) { return o; }, [&](int) { return data_for(o); });
  CHECK(messages == std::vector<std::string>(3, ""));
}

TEST_CASE("a rank with another flag stops every rank with one line naming the rank, the flag and both values",
          "[agree]") {
  // (flag, how rank 2 differs, the sentence every rank must print)
  struct Case {
    std::function<void(Options&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](Options& o) { o.batch = 16; }, "rank 2 was started with --batch 16, rank 0 with --batch 32"},
      {[](Options& o) { o.lr = 0.1f; }, "rank 2 was started with --lr 0.1, rank 0 with --lr 0.05"},
      {[](Options& o) { o.seed = 7; }, "rank 2 was started with --seed 7, rank 0 with --seed 42"},
      {[](Options& o) { o.steps = 299; }, "rank 2 was started with --steps 299, rank 0 with --steps 300"},
      {[](Options& o) { o.optimizer = "adam"; }, "rank 2 was started with --optimizer adam, rank 0 with --optimizer sgd"},
      {[](Options& o) { o.no_shuffle = true; }, "rank 2 was started with --no-shuffle, rank 0 without it"},
  };
  Options o = agreement_options();
  for (const auto& c : cases) {
    auto options_of = [&](int rank) {
      Options mine = o;
      if (rank == 2) c.change(mine);
      return mine;
    };
    auto messages = agree(3, options_of, [&](int) { return data_for(o); });  // same data: only the flag differs
    for (int r = 0; r < 3; ++r) {
      INFO("rank " << r << ": " << messages[r]);
      CHECK_THAT(messages[r], contains_text(c.expected));
      CHECK(messages[r].find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("when several ranks differ, the lowest one is named", "[agree]") {
  Options o = agreement_options();
  auto messages = agree(
      4,
      [&](int rank) {
        Options mine = o;
        if (rank >= 1) mine.batch = 8 * (rank + 1);
        return mine;
      },
      [&](int) { return data_for(o); });
  for (const auto& m : messages) CHECK_THAT(m, contains_text("rank 1 was started with --batch 16, rank 0 with --batch 32"));
}

TEST_CASE("a rank holding other data (same flags) is named, down to one label", "[agree]") {
  Options o = agreement_options();
  Dataset reference = data_for(o);
  auto one_label_off = [&](int rank) {
    Dataset d = data_for(o);
    if (rank == 1) d.y[17] = (d.y[17] + 1) % d.classes;
    return d;
  };
  auto messages = agree(2, [&](int) { return o; }, one_label_off);
  for (const auto& m : messages) CHECK_THAT(m, contains_text("rank 1 holds a different data set than rank 0"));
  Options other_seed = o;
  other_seed.seed = 43;
  auto other_x = [&](int rank) { return rank == 1 ? data_for(other_seed) : reference; };
  messages = agree(2, [&](int) { return o; }, other_x);
  for (const auto& m : messages) CHECK_THAT(m, contains_text("rank 1 holds a different data set than rank 0"));
}

// ch03 and ch04 call check_ranks_agree right after load_dataset.
TEST_CASE("mpirun processes started with different --batch stop with one line naming both", "[agree][mpi]") {
  if (!mpi_available()) return;
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  std::string program = dpt_test::program_path("ch03_naive_dp");
  std::string common = " --comm mpi --model 8-4-3 --samples 64 --steps 3 --quiet";
  auto run = dpt_test::run_mpmd(program + common + " --batch 8", program + common + " --batch 16");
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, contains_text("rank 1 was started with --batch 16, rank 0 with --batch 8"));
}
