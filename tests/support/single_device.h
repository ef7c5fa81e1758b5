// single_device.h — the data-parallel equivalence oracle: a chapter's saved
// weights against the core's single-device training on the global batch from
// the same start, in the test process (no chapter code, no communication).
#pragma once

#include "support/catch.h"
#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

#include "dpt/checkpoint.h"
#include "dpt/data_parallel.h"
#include "dpt/options.h"
#include "support/run_program.h"

namespace dpt_test {

/// Flags of a small, fast problem: 30 momentum steps on a 32-16-4 MLP
/// (`quiet`: without narration).
inline std::string small_problem(int global_batch, bool quiet = true) {
  return std::string(quiet ? "--quiet " : "") + "--model 32-16-4 --samples 256 --steps 30 --optimizer momentum " +
         "--lr 0.05 --batch " + std::to_string(global_batch);
}

/// max(a, b) where a NaN wins: a NaN is the largest difference there is.
inline double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }

/// The oracle: small_problem (plus `common_flags`, e.g. --load-weights) trained
/// on one device with `global_batch`, by the core alone. Returns the path of
/// its final weights.
inline std::string single_device_weights(int global_batch, const std::string& common_flags = "") {
  dpt::Options o;
  CLI::App app;
  dpt::add_common_flags(app, o);
  app.parse(small_problem(global_batch) + " " + common_flags);  // the very flags the chapter gets
  dpt::Dataset data = dpt::load_dataset(o);
  dpt::MLP model = dpt::train_single_device(o, data, o.batch);
  std::string path = temp_path("single_" + std::to_string(global_batch) + ".safetensors");
  dpt::save_weights(path, model.named_parameters());
  return path;
}

/// Writes small_problem's model initialised from `seed` to a fresh file and
/// returns "--load-weights <file>": a start that no replica is initialised
/// with (they use seed+1+rank), so the chapter trains from it only when the
/// master copy is broadcast to every replica, from rank 0.
inline std::string load_master_weights_flag(uint64_t seed) {
  dpt::Options o;
  CLI::App app;
  dpt::add_common_flags(app, o);
  app.parse(small_problem(8));
  o.seed = seed;
  std::string path = temp_path("master_" + std::to_string(seed) + ".safetensors");
  dpt::save_weights(path, dpt::build_model(o, dpt::Device::host()).named_parameters());
  return "--load-weights " + path;
}

/// Largest |a − b| over all tensors of two weight files with the same names;
/// NaN when either holds a NaN.
inline double max_weight_difference(const std::string& a_path, const std::string& b_path) {
  dpt::SafeTensorsFile a = dpt::read_safetensors(a_path), b = dpt::read_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  double worst = 0;
  for (auto& [name, t] : a.tensors) {
    REQUIRE(b.tensors.count(name) == 1);
    auto x = t.floats(), y = b.tensors.at(name).floats();
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) worst = nan_max(worst, std::fabs(double(x[i]) - double(y[i])));
  }
  return worst;
}

// Tolerance: dpt::kSingleDeviceTolerance (1e-4), argued in dpt/data_parallel.h:
// float sums in another order drift ~1e-7 here; a real mistake moves weights by
// 1e-3 or more within these 30 steps.

/// Runs `program` on `ranks` ranks (threads, or `mpirun -np ranks` when
/// `mpi`) on small_problem with batch 8 per rank plus `extra` chapter flags and
/// `common_flags` (given to the oracle too), and checks its final weights
/// against one device trained on the global batch 8·ranks.
inline void check_matches_single_device(const std::string& program, int ranks, bool mpi, const std::string& extra,
                                        const std::string& common_flags = "") {
  INFO(program << " on " << ranks << (mpi ? " MPI processes" : " rank threads") << " " << common_flags);
  std::string single = single_device_weights(8 * ranks, common_flags);
  std::string dp = temp_path(program + "_dp.safetensors");
  std::string args = extra + " --no-verify " + small_problem(8) + " " + common_flags + " --save-weights " + dp;
  auto run = mpi ? run_mpi(program, ranks, "--comm mpi --comm-timeout 20 " + args)
                 : run_program(program, "--ranks " + std::to_string(ranks) + " " + args);
  INFO("the program must run to the end with every verdict ✔ (exit 0); it says: " << summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  INFO("judged here: the weights after training = one device's on the global batch, to "
       << dpt::kSingleDeviceTolerance);
  CHECK(max_weight_difference(single, dp) < dpt::kSingleDeviceTolerance);
  std::remove(dp.c_str());
  std::remove(single.c_str());
}

}  // namespace dpt_test
