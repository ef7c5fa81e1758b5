/// @file mixed_training.h
/// @brief Chapter 11's training loop (provided, not a hole): forward with
/// every stored tensor rounded to the format, backward on scale · loss, the
/// 16-bit gradients, your master_step and update_loss_scale, and the
/// measurements the lecture judges — overflowed steps, the scale at every
/// step, gradient entries lost to underflow, bytes per parameter by category.
///
/// What a 16-bit step stores, and where (the store op of precision.h):
///   x, every Linear's output (B, out) and the logits — in the format;
///   the GEMMs multiply 16-bit values and sum in fp32 (tensor cores do so:
///   on cuda they run there, half_linear.h);
///   every activation's gradient, and each weight's gradient — in the format;
///   the loss, its gradient, the master weights and the optimizer — fp32.
/// fp32 runs skip all of it: no master copy, the optimizer on the weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ch11.h"
#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/options.h"
#include "dpt/zero_formula.h"
#include "recompute.h"

namespace dpt::ch11 {

/// One training setting: a precision and its loss scaler.
struct Setting {
  Precision precision = Precision::FP32;  ///< how weights, activations and gradients are stored
  LossScaler scaler;         ///< its settings and initial state
  std::string loss_scale;    ///< "dynamic", "static:S", "none" (as given)
  Recompute recompute = Recompute::None;  ///< --recompute
  /// "fp32", "bf16", "fp16 + dynamic scaling", "fp16, no scaling", "fp16 + static 1024".
  std::string name() const;
};

/// Parses --loss-scale: "dynamic" (GradScaler's defaults, `growth_interval`),
/// "static:S" (S > 0, S and 1/S finite floats) or "none"; throws dpt::Error with one
/// sentence otherwise.
LossScaler parse_loss_scale(const std::string& text, int64_t growth_interval);

/// Model-state bytes per parameter, by the categories of chapter 07's ledger:
/// params (2 in 16 bits, 4 in fp32), grads (stored as the weights are),
/// state (fp32 master copy in 16-bit runs, and the optimizer's moments).
using BytesPerParam = StateBytes;
/// The formula: 16-bit runs 2 + 2 + (4 master + 4 per optimizer moment);
/// fp32 runs 4 + 4 + 4 per moment. Adam keeps 2 moments (2 + 2 + 12, or 16 in
/// fp32), momentum 1, sgd 0.
BytesPerParam formula_bytes(Precision p, const std::string& optimizer);

/// What one run measured.
struct MixedRun {
  /// A run of `trained` (weights as built, before training).
  explicit MixedRun(MLP trained) : model(std::move(trained)) {}
  MLP model;                      ///< the trained 16-bit (or fp32) weights
  std::vector<double> losses;     ///< the loss of every step (nan/inf where it overflowed)
  std::vector<float> scales;      ///< the loss scale each step used
  std::vector<bool> overflowed;   ///< whether each step's gradients held an inf or NaN (step skipped)
  int64_t skipped_changed = 0;    ///< skipped steps after which a weight, master or moment had other bits
  Flushes flushes;                ///< gradient entries (activations' and weights') stored: non-zero, flushed to 0
  BytesPerParam measured;         ///< the ledger's categories after the last step, at the format's width
  double seconds = 0;             ///< training time
  /// Fraction of the non-zero gradient entries this run stored that the format flushed to 0.
  double underflow() const { return flushes.fraction(); }
  /// Steps skipped because their gradients overflowed.
  int64_t skipped() const;
};

/// Trains `setting` from the model the flags give (--seed, --load-weights),
/// its weights rounded to the format, for o.steps steps of o.batch on
/// `device` (cpu, or cuda: 16-bit GEMMs on tensor cores, half_linear.h),
/// counting every gradient entry it stores.
MixedRun train_mixed(const Options& o, const Dataset& data, Device& device, const Setting& setting,
                     bool show_progress);

}  // namespace dpt::ch11
