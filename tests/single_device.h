// single_device.h — the data-parallel equivalence oracle: a chapter's saved
// weights against ch01_sgd (one device, no communication) trained on the
// global batch from the same start.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "dpt/checkpoint.h"
#include "run_program.h"

namespace dpt_test {

/// Small, fast problem: 30 momentum steps (momentum uses dpt's optimizer, so
/// no other chapter's hole is involved) on a 32-16-4 MLP.
inline std::string small_problem(int global_batch) {
  return "--quiet --model 32-16-4 --samples 256 --steps 30 --optimizer momentum --lr 0.05 --batch " +
         std::to_string(global_batch);
}

/// Trains ch01_sgd with the global batch and returns its final weights' path.
inline std::string single_device_weights(int global_batch) {
  std::string path = temp_path("single_" + std::to_string(global_batch) + ".safetensors");
  auto run = run_program("ch01_sgd", small_problem(global_batch) + " --save-weights " + path);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
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

}  // namespace dpt_test
