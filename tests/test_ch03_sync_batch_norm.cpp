// test_ch03_sync_batch_norm.cpp — chapter 03's SyncBatchNorm holes
// (sync_batch_norm.h) by their laws: the synced statistics are the
// concatenated batch's, computed serially in double here (no dpt code); the
// synced op equals one device's batch_norm on the concatenated batch, forward
// and backward; and the chapter, run with --batchnorm sync, passes its step
// check under threads and mpirun, while --batchnorm local reports its gap.
//
// Ranks hold different row counts and columns shifted per rank, so that each
// likely mistake moves the answer by O(1): averaging the ranks' variances
// (no mean correction), an unweighted mean of means, dividing by one rank's
// count, forgetting the backward sums.
#include "support/catch.h"

#include <cmath>
#include <map>
#include <mutex>

#include "dpt/autograd.h"
#include "dpt/comm.h"
#include "dpt/nn.h"
#include "support/gradcheck.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "sync_batch_norm.h"

using namespace dpt;

namespace {
constexpr int64_t kColumns = 3;
int64_t rows_of(int rank) { return 2 + rank; }  // unequal shards: 2, 3, 4, 5 rows

// Rank r's rows: standard normals scaled by (1 + r) and shifted by 3r.
Tensor rank_rows(int rank, Device& device, uint64_t seed) {
  Rng rng(seed + uint64_t(rank));
  std::vector<float> v(static_cast<std::size_t>(rows_of(rank) * kColumns));
  for (float& x : v) x = float(rank + 1) * rng.normal() + 3.0f * float(rank);
  return Tensor::from_vector({rows_of(rank), kColumns}, v, device);
}

// Every rank's rows stacked, rank 0 first.
Tensor concatenated(int world, uint64_t seed) {
  std::vector<float> all;
  for (int r = 0; r < world; ++r)
    for (float x : rank_rows(r, Device::host(), seed).to_vector()) all.push_back(x);
  return Tensor::from_vector({int64_t(all.size()) / kColumns, kColumns}, all, Device::host());
}

// A rank's own moments, in double (the input the hole receives).
BatchMoments own_moments(const Tensor& x) {
  const int64_t rows = x.size(0);
  std::vector<float> mean(kColumns), var(kColumns);
  std::vector<float> v = x.to_vector();
  for (int64_t c = 0; c < kColumns; ++c) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < rows; ++i) s += v[i * kColumns + c];
    for (int64_t i = 0; i < rows; ++i) q += (v[i * kColumns + c] - s / rows) * (v[i * kColumns + c] - s / rows);
    mean[c] = float(s / rows), var[c] = float(q / rows);
  }
  return {Tensor::from_vector({kColumns}, mean, x.device()), Tensor::from_vector({kColumns}, var, x.device()), rows};
}
}  // namespace

TEST_CASE("sync_batch_moments: every rank gets the concatenated batch's mean, biased variance and count",
          "[ch03][batch_norm]") {
  for (int world : {1, 2, 3, 4}) {
    INFO(world << " ranks with 2, 3, 4, 5 rows and means 0, 3, 6, 9");
    const BatchMoments oracle = own_moments(concatenated(world, 5));
    std::mutex mutex;
    std::map<int, BatchMoments> seen;
    dpt_test::run_ranks(world, [&](Context& ctx) {
      BatchMoments m = ch03::sync_batch_moments(ctx.comm, own_moments(rank_rows(ctx.rank, ctx.device, 5)));
      std::lock_guard<std::mutex> lock(mutex);
      seen[ctx.rank] = {m.mean.to(Device::host()), m.var.to(Device::host()), m.count};
    });
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r);
      if (seen[r].count != oracle.count)
        FAIL_CHECK("the count is " << seen[r].count << ", the concatenated batch has " << oracle.count
                                   << " rows: the statistics' count must be every rank's rows together");
      if (max_abs_diff(seen[r].mean, oracle.mean) > 1e-5f)
        FAIL_CHECK("the mean differs from the concatenated batch's by " << max_abs_diff(seen[r].mean, oracle.mean)
                                                                        << ": each rank's mean must weigh by its count");
      // Variances ~1…60 here; float32 rounding of a few sums: 1e-4 relative.
      double worst = 0;
      for (int64_t c = 0; c < kColumns; ++c)
        worst = std::max(worst, std::abs(double(seen[r].var.data()[c]) - oracle.var.data()[c]) / oracle.var.data()[c]);
      if (!(worst <= 1e-4))
        FAIL_CHECK("the variance differs from the concatenated batch's by " << worst << " relative: it is the spread "
                   "around the global mean, not an average of the ranks' variances around their own means");
      if (max_abs_diff(seen[r].var, seen[0].var) != 0 || max_abs_diff(seen[r].mean, seen[0].mean) != 0)
        FAIL_CHECK("rank " << r << "'s statistics differ from rank 0's: every rank must normalize alike");
    }
  }
}

TEST_CASE("sync_gradient_sums: both sums become the sums over every rank", "[ch03][batch_norm]") {
  const int world = 3;
  std::mutex mutex;
  std::map<int, std::pair<std::vector<float>, std::vector<float>>> seen;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    Tensor a = Tensor::full({kColumns}, float(ctx.rank + 1), ctx.device);           // Σ over ranks: 6
    Tensor b = Tensor::full({kColumns}, float(10 * (ctx.rank + 1)), ctx.device);    // 60
    ch03::sync_gradient_sums(ctx.comm, a, b);
    std::lock_guard<std::mutex> lock(mutex);
    seen[ctx.rank] = {a.to_vector(), b.to_vector()};
  });
  for (int r = 0; r < world; ++r)
    for (int64_t c = 0; c < kColumns; ++c) {
      if (seen[r].first[c] != 6.0f || seen[r].second[c] != 60.0f)
        FAIL_CHECK("rank " << r << " holds Σ dy = " << seen[r].first[c] << " and Σ dy·x̂ = " << seen[r].second[c]
                           << ", the sums over 3 ranks are 6 and 60: each sum must cover every rank's rows");
    }
}

TEST_CASE("SyncBatchNorm on N ranks = one device's batch_norm on the concatenated batch, forward and backward",
          "[ch03][batch_norm]") {
  for (int world : {2, 3}) {
    INFO(world << " ranks");
    Device& host = Device::host();
    Tensor weight = Tensor::from_vector({kColumns}, {1.5f, -0.5f, 2.0f}, host);
    Tensor bias = Tensor::from_vector({kColumns}, {0.1f, 0.2f, -0.3f}, host);
    Tensor x_all = concatenated(world, 9), dy_all = concatenated(world, 77);
    // The oracle: one device, all rows, loss Σ dy ⊙ y.
    Tensor x1 = x_all.clone(), w1 = weight.clone(), b1 = bias.clone();
    for (Tensor* t : {&x1, &w1, &b1}) t->set_requires_grad(true);
    BatchNormRunning running1{Tensor::zeros({kColumns}, host), Tensor::full({kColumns}, 1.0f, host)};
    Tensor y1 = batch_norm(x1, w1, b1, 1e-5f, &running1);
    backward(y1, dy_all);

    std::mutex mutex;
    std::map<int, std::vector<Tensor>> seen;  // y, dx, dweight, dbias, running mean, running var
    dpt_test::run_ranks(world, [&](Context& ctx) {
      ch03::SyncBatchStatistics sync(ctx.comm);
      Tensor x = rank_rows(ctx.rank, ctx.device, 9), dy = rank_rows(ctx.rank, ctx.device, 77);
      Tensor w = weight.to(ctx.device), b = bias.to(ctx.device);
      for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
      BatchNormRunning running{Tensor::zeros({kColumns}, ctx.device), Tensor::full({kColumns}, 1.0f, ctx.device)};
      Tensor y = batch_norm(x, w, b, 1e-5f, &running, &sync);
      backward(y, dy);  // rank r's part of Σ dy ⊙ y over all rows
      std::lock_guard<std::mutex> lock(mutex);
      seen[ctx.rank] = {y.to(host), x.grad().to(host), w.grad().to(host), b.grad().to(host),
                        running.mean.to(host), running.var.to(host)};
    });
    int64_t first = 0;
    Tensor dweight = Tensor::zeros({kColumns}, host), dbias = Tensor::zeros({kColumns}, host);
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r);
      const int64_t n = rows_of(r);
      // Values O(1…10), a few dozen float operations: 1e-4 is far above rounding, far below a mistake.
      const float dy_off = max_abs_diff(seen[r][0], y1.rows(first, first + n));
      const float dx_off = max_abs_diff(seen[r][1], x1.grad().rows(first, first + n));
      if (dy_off > 1e-4f)
        FAIL_CHECK("forward: this rank's rows differ from one device's by " << dy_off
                   << ": the statistics must be the concatenated batch's (sync_batch_moments)");
      if (dx_off > 1e-4f)
        FAIL_CHECK("backward: dx of this rank's rows differs from one device's by " << dx_off
                   << ": the two backward sums must cover every rank's rows (sync_gradient_sums)");
      if (max_abs_diff(seen[r][4], running1.mean) > 1e-5f || max_abs_diff(seen[r][5], running1.var) > 1e-4f)
        FAIL_CHECK("the running statistics differ from one device's: the global count must unbias the variance");
      axpy_(dweight, 1.0f, seen[r][2]);
      axpy_(dbias, 1.0f, seen[r][3]);
      first += n;
    }
    // Each rank's parameter gradients cover its own rows; data parallel sums or averages them.
    CHECK(max_abs_diff(dweight, w1.grad()) < 1e-4f);
    CHECK(max_abs_diff(dbias, b1.grad()) < 1e-4f);
  }
}

// ----------------------------------------------------------------------------
// the chapter

TEST_CASE("chapter: --batchnorm sync passes the step check, --batchnorm local reports its gap", "[ch03][batch_norm]") {
  auto sync = dpt_test::run_program("ch03_naive_dp", "--ranks 4 --steps 20 --quiet --batchnorm sync");
  INFO(dpt_test::summary_line(sync.output));
  CHECK(sync.exit_code == 0);
  CHECK_THAT(sync.output, contains_text("\u2714 synced gradient = one device's"));
  auto local = dpt_test::run_program("ch03_naive_dp", "--ranks 4 --steps 20 --quiet --batchnorm local");
  INFO(dpt_test::summary_line(local.output));
  CHECK(local.exit_code == 0);  // the gap is the lesson, not the student's mistake
  CHECK_THAT(local.output, contains_text("\u00b7 local BatchNorm"));
  CHECK_THAT(local.output, !contains_text("synced gradient = one device's"));
}

TEST_CASE("chapter: --batchnorm sync under mpirun -np 2 passes the step check", "[ch03][batch_norm][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = dpt_test::run_mpi("ch03_naive_dp", 2, "--comm mpi --comm-timeout 20 --steps 20 --quiet --batchnorm sync");
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, contains_text("\u2714 synced gradient = one device's"));
}
