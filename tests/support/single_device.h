// single_device.h — the data-parallel equivalence oracle: a chapter's saved
// weights against serial single-device training on the global batch from the
// same start (the core's loop, in the test process: no chapter code).
#pragma once

#include "support/catch.h"
#include <string>

#include "dpt/checkpoint.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/options.h"
#include "support/run_program.h"

namespace dpt_test {

/// Flags of a small, fast problem: 30 momentum steps on a 32-16-4 MLP.
inline std::string small_problem(int global_batch) {
  return "--quiet --model 32-16-4 --samples 256 --steps 30 --optimizer momentum --lr 0.05 --batch " +
         std::to_string(global_batch);
}

/// The oracle: the same problem trained serially on one device, in this
/// process, with the core alone (no chapter code, no communication). Returns
/// the path of its final weights.
inline std::string single_device_weights(int global_batch) {
  dpt::Options o;
  CLI::App app;
  dpt::add_common_flags(app, o);
  app.parse(small_problem(global_batch));  // the very flags the chapter gets
  dpt::Dataset data = dpt::load_dataset(o);
  dpt::MLP model = dpt::build_model(o, dpt::Device::host());
  auto optimizer = dpt::make_optimizer(o.optimizer, model.parameters(), o.lr);
  dpt::BatchSampler sampler(data.size(), o.batch, !o.no_shuffle, o.seed);
  for (int64_t step = 0; step < o.steps; ++step) {
    dpt::Batch batch = dpt::gather_batch(data, sampler.indices(step), dpt::Device::host());
    optimizer->zero_grad();
    dpt::softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
    optimizer->step();
  }
  std::string path = temp_path("single_" + std::to_string(global_batch) + ".safetensors");
  dpt::save_weights(path, model.named_parameters());
  return path;
}

/// Largest |a − b| over all tensors of two weight files with the same names.
inline double max_weight_difference(const std::string& a_path, const std::string& b_path) {
  dpt::SafeTensorsFile a = dpt::read_safetensors(a_path), b = dpt::read_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  double worst = 0;
  for (auto& [name, t] : a.tensors) {
    REQUIRE(b.tensors.count(name) == 1);
    auto x = t.floats(), y = b.tensors.at(name).floats();
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::abs(x[i] - y[i])));
  }
  return worst;
}

// Tolerance, argued: the data-parallel run sums the same products in another
// order (per-shard means, then a mean of means), so each step differs by float
// rounding, ~1e-7 relative on O(0.1) gradients; 30 momentum steps at lr 0.05
// accumulate that to ~1e-7 on weights (ch03 prints 7e-8 at 300 steps). 1e-5
// is 100× above that; a real mistake (a shard dropped, a sum not divided by N,
// one rank's gradient counted twice) moves weights by ≥ 1e-3 after 30 steps.
constexpr double kEquivalenceTolerance = 1e-5;

/// Runs `program` on `ranks` ranks (threads, or `mpirun -np ranks` when
/// `mpi`) on small_problem with batch 8 per rank plus `extra` flags, and checks
/// its final weights against one device trained on the global batch 8·ranks.
inline void check_matches_single_device(const std::string& program, int ranks, bool mpi, const std::string& extra) {
  INFO(program << " on " << ranks << (mpi ? " MPI processes" : " rank threads"));
  std::string single = single_device_weights(8 * ranks);
  std::string dp = temp_path(program + "_dp.safetensors");
  std::string args = extra + " --no-verify " + small_problem(8) + " --save-weights " + dp;
  auto run = mpi ? run_mpi(program, ranks, "--comm mpi " + args)
                 : run_program(program, "--ranks " + std::to_string(ranks) + " " + args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(max_weight_difference(single, dp) < kEquivalenceTolerance);
  std::remove(dp.c_str());
  std::remove(single.c_str());
}

}  // namespace dpt_test
