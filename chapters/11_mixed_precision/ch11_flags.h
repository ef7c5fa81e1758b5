/// @file ch11_flags.h
/// @brief Chapter 11's own flags (harness, not a hole): registered with
/// their bounds, so a bad value is one line naming the flag and exit 2.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace dpt::ch11 {

/// What chapter 11's flags asked for.
struct Ch11Flags {
  std::string precision = "fp16";     ///< --precision: fp32, bf16 or fp16
  std::string loss_scale = "dynamic"; ///< --loss-scale: dynamic, static:S or none
  std::string recompute = "none";     ///< --recompute: the flags' own run's checkpoints
  std::string recompute_model = "784-256-256-256-256-256-256-256-256-10";  ///< section 6's deeper model
  std::string stage = "all";          ///< section 7: ZeRO stage 0, 1, 2, 3 or all four
  int ranks = 4;                      ///< section 7: N, so a bare run divides the states among 4
  /// PyTorch: 2000, for runs of 10^5 steps; here the scale is seen to grow and back off.
  int64_t growth_interval = 50;
  bool compare = true;                ///< also train fp32, bf16, fp16 with and without scaling
};

/// The most thread ranks section 7 starts (its ranks are its own, not --ranks of a launch).
constexpr int kMaxZeroRanks = 64;

/// Registers --precision, --loss-scale, --recompute, --recompute-model,
/// --growth-interval, --stage, --ranks and --compare/--no-compare into `flags`.
void add_ch11_flags(CLI::App& app, Ch11Flags& flags);

}  // namespace dpt::ch11
