// test_running_statistics.cpp — batch norm's running statistics across ranks:
// a --load-weights file's reach every replica (make_replica, and
// broadcast_running_statistics for chapter 03's master copy), and
// running_statistics_spread sees a rank apart. The expected values are the
// ones the test wrote into the file, not read back through the code under test.
#include "support/catch.h"
#include <cmath>
#include <mutex>
#include <optional>
#include <vector>

#include "dpt/checkpoint.h"
#include "dpt/data_parallel.h"
#include "support/ranks.h"
#include "support/run_program.h"

using namespace dpt;

namespace {
// Layer l's running mean entry i and var entry i, as the test writes them.
float mean_at(std::size_t l, std::size_t i) { return 0.25f * float(i) - float(l) - 0.5f; }
float var_at(std::size_t l, std::size_t i) { return 2.0f + float(i) + 0.125f * float(l); }

// Every batch norm's running mean and var of `model`, layer by layer, as host values.
std::vector<std::vector<float>> statistics_of(const MLP& model) {
  std::vector<std::vector<float>> out;
  for (const BatchNorm1d& norm : model.norms())
    out.push_back(norm.running.mean.to_vector()), out.push_back(norm.running.var.to_vector());
  return out;
}

// The statistics the test wrote, in statistics_of's order.
std::vector<std::vector<float>> written(const std::vector<int64_t>& hidden) {
  std::vector<std::vector<float>> out;
  for (std::size_t l = 0; l < hidden.size(); ++l) {
    std::vector<float> mean, var;
    for (std::size_t i = 0; i < std::size_t(hidden[l]); ++i) mean.push_back(mean_at(l, i)), var.push_back(var_at(l, i));
    out.push_back(mean), out.push_back(var);
  }
  return out;
}

// Sets `model`'s running statistics to the written ones.
void write_statistics(MLP& model) {
  for (std::size_t l = 0; l < model.norms().size(); ++l) {
    BatchNormRunning running = model.norms()[l].running;  // handles
    for (int64_t i = 0; i < running.mean.numel(); ++i)
      running.mean.data()[i] = mean_at(l, std::size_t(i)), running.var.data()[i] = var_at(l, std::size_t(i));
  }
}
}  // namespace

TEST_CASE("make_replica: a loaded file's batch-norm running statistics reach every rank, not rank 0's alone", "[core]") {
  Options o;
  o.model = "8-5-4-3";
  o.batchnorm = "sync";
  Rng rng(5);
  MLP saved(o.widths(), Device::host(), rng, true);
  write_statistics(saved);
  o.load_weights = dpt_test::temp_path("running_statistics.safetensors");
  save_weights(o.load_weights, saved.named_state());
  const auto expected = written({5, 4});
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> seen(3);
  std::vector<double> spread(3, -1);
  dpt_test::run_ranks(3, [&](Context& ctx) {
    MLP replica = make_replica(ctx, o);
    const double s = running_statistics_spread(ctx, replica);
    std::lock_guard<std::mutex> lock(mutex);
    seen[std::size_t(ctx.rank)] = statistics_of(replica);
    spread[std::size_t(ctx.rank)] = s;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(seen[std::size_t(r)] == expected);  // a broadcast of the weights alone leaves ranks 1, 2 at mean 0, var 1
    CHECK(spread[std::size_t(r)] == 0);
  }
  std::remove(o.load_weights.c_str());
}

TEST_CASE("broadcast_running_statistics: rank 0's master copy's statistics reach every replica, and without batch norm it is a "
          "no-op on every rank", "[core]") {
  for (bool batch_norm : {true, false}) {
    Options o;
    o.model = "6-4-3";
    o.batchnorm = batch_norm ? "local" : "none";
    std::mutex mutex;
    std::vector<std::vector<std::vector<float>>> seen(3);
    std::vector<double> before(3), after(3);
    dpt_test::run_ranks(3, [&](Context& ctx) {
      MLP replica = make_replica_apart(ctx, o);
      std::optional<MLP> master;
      if (ctx.rank == 0) {
        Rng rng(1);
        master.emplace(o.widths(), Device::host(), rng, batch_norm);
        write_statistics(*master);
      }
      if (ctx.rank == 2) write_statistics(replica);  // a rank apart: the broadcast must overwrite it too
      const double b = running_statistics_spread(ctx, replica);
      broadcast_running_statistics(ctx.comm, master ? &*master : nullptr, replica);
      const double a = running_statistics_spread(ctx, replica);
      std::lock_guard<std::mutex> lock(mutex);
      seen[std::size_t(ctx.rank)] = statistics_of(replica);
      before[std::size_t(ctx.rank)] = b, after[std::size_t(ctx.rank)] = a;
    });
    for (int r = 0; r < 3; ++r) {
      INFO("batch norm " << batch_norm << ", rank " << r);
      CHECK(seen[std::size_t(r)] == (batch_norm ? written({4}) : std::vector<std::vector<float>>{}));
      CHECK(after[std::size_t(r)] == 0);
      // Before: rank 2 held the written statistics, the others mean 0 and var 1: the spread is the largest gap.
      CHECK(before[std::size_t(r)] == (batch_norm ? Approx(std::fabs(var_at(0, 3) - 1.0f)) : Approx(0)));
    }
  }
}
