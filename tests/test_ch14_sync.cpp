// test_ch14_sync.cpp — chapter 14's gradient sync: chapter 05's buckets on
// chapter 04's ring (--sync buckets, the default) give every rank the same
// average gradient as the library's all-reduce (--sync library), on 2 rank
// threads; and the chapter runs with either, and under mpirun.
#include "support/catch.h"
#include "support/relative_gap.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "bucketed_sync.h"
#include "corpus.h"
#include "dpt/data_parallel.h"
#include "gpt.h"
#include "support/ranks.h"
#include "support/run_program.h"

using dpt::Tensor;

namespace {
std::vector<float> flat_gradients(const Gpt& model) {
  std::vector<float> out;
  for (const Tensor& p : model.parameters()) {
    std::vector<float> g = p.grad().to_vector();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

using dpt_test::relative_gap;  // max |a − b| / max |b|; NaN when the sizes differ

// What one rank saw.
struct RankGradients {
  std::vector<float> local;     // its own batch's gradient, before any averaging
  std::vector<float> library;   // after the library's all-reduce (Avg)
  std::vector<float> buckets;   // after chapter 05's buckets on chapter 04's ring
  std::size_t buckets_used = 0;
};

const std::string kSyncRun =
    "--data synthetic --layers 2 --heads 2 --width 32 --context 16 --batch 4 --steps 30 --eval-every 15 --sample 0 ";
}  // namespace

TEST_CASE("ch14 --sync buckets gives every rank the library all-reduce's average gradient (2 ranks, several buckets)",
          "[ch14]") {
  std::array<RankGradients, 2> seen;
  dpt_test::run_ranks(2, [&](dpt::Context& ctx) {
    const Corpus text = load_text("synthetic", 8, 7);
    GptShape shape{text.vocab(), 8, 2, 2, 16};
    dpt::Rng rng(3);  // the same weights on both ranks
    Gpt model(shape, ctx.device, rng);
    std::vector<int64_t> starts;  // each rank its own 3 windows
    for (int64_t b = 0; b < 3; ++b) starts.push_back(ctx.rank * 50 + b * 11);
    const dpt::TokenBatch batch = dpt::window_batch(text.train, starts, 8);
    auto loss = [&] { return model.loss(batch.inputs, batch.targets, 3); };
    RankGradients& mine = seen[std::size_t(ctx.rank)];

    loss().backward();
    mine.local = flat_gradients(model);
    std::vector<Tensor> grads;
    for (const Tensor& p : model.parameters()) grads.push_back(p.grad());
    dpt::average_over_ranks(ctx.comm, grads);
    mine.library = flat_gradients(model);

    for (Tensor& p : model.parameters()) p.set_grad(Tensor());
    std::vector<std::string> names;
    for (const dpt::NamedTensor& p : model.named_parameters()) names.push_back(p.name);
    dpt::ch05::BucketedSync sync(ctx, model.parameters(), names, dpt::ch05::BucketPlan{4096, 4096});
    sync.begin_step(0);
    sync.backward(loss());
    sync.finish();
    mine.buckets = flat_gradients(model);
    mine.buckets_used = sync.layout().size();
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const RankGradients& g = seen[std::size_t(r)];
    CHECK(g.buckets_used > 2);  // 4 KiB caps on ~34 KiB of gradients: the ring ran once per bucket
    // The ranks' batches differ, so averaging changes each gradient by far more than the bound below.
    CHECK(relative_gap(g.local, g.library) > 1e-2);
    // Two ranks: each entry is one addition and a halving, both exact in either
    // order, so the ring's result is the library's to the last bit; 1e-6 leaves
    // room for a library that rounds once more. A sum for a mean is off by 2×,
    // a bucket unpacked into the wrong tensor by O(1).
    CHECK(relative_gap(g.buckets, g.library) <= 1e-6);
  }
}

TEST_CASE("chapter: ch14 --sync buckets prints its buckets and chapter 05's schedule verdicts, and --sync library passes too",
          "[ch14]") {
  auto buckets = dpt_test::run_program("ch14_language_model", "--ranks 2 " + kSyncRun + "--bucket-mb 0.02");
  INFO(buckets.output);
  REQUIRE(buckets.exit_code == 0);
  CHECK(buckets.output.find("your buckets from chapter 05") != std::string::npos);
  CHECK(buckets.output.find("bucket 3: ") != std::string::npos);  // ~100 KiB in caps of 20 KiB
  CHECK(buckets.output.find("buckets launched before their last gradient was ready") != std::string::npos);
  CHECK(buckets.output.find("\u2718") == std::string::npos);

  auto library = dpt_test::run_program("ch14_language_model", "--ranks 2 " + kSyncRun + "--sync library");
  INFO(library.output);
  REQUIRE(library.exit_code == 0);
  CHECK(library.output.find("the library's all-reduce") != std::string::npos);
  CHECK(library.output.find("buckets launched before") == std::string::npos);
  CHECK(library.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch14 refuses a bad --sync or --bucket-mb with one line and exit 2", "[ch14]") {
  for (const char* bad : {"--sync ring", "--bucket-mb -1", "--bucket-mb nan", "--bucket-mb 2 --sync library"}) {
    auto run = dpt_test::run_program("ch14_language_model", bad);
    INFO(bad << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(std::string(bad).substr(0, std::string(bad).find(' '))) != std::string::npos);
  }
}

TEST_CASE("chapter: under mpirun -np 2, ch14's buckets pass every verdict", "[ch14][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = dpt_test::run_mpi("ch14_language_model", 2, "--comm mpi --comm-timeout 20 " + kSyncRun + "--bucket-mb 0.02");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("buckets launched before their last gradient was ready") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}
