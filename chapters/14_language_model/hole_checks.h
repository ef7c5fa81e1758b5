/// @file hole_checks.h
/// @brief Chapter 14's verdicts on your three holes, run before training on
/// inputs small enough to check by hand: attention against its definition
/// written out, LayerNorm's backward against finite differences, generate on
/// a model whose answers are known. A hole not written yet is recorded (it
/// gets no verdict) and the parts that need it are skipped.
#pragma once

#include <string>
#include <vector>

#include "corpus.h"
#include "dpt/holes.h"
#include "dpt/verdict.h"
#include "gpt.h"

/// What the lecture may run after the probes.
struct HoleStatus {
  bool attention = false;   ///< causal_attention written (the model can forward)
  bool layer_norm = false;  ///< layer_norm_backward written (the model can train)
  bool generate = false;    ///< generate written (the model can write)
  std::vector<std::string> failed;  ///< the written holes with a ✘ among their checks, in order
};

/// Runs each hole on this rank alone, recording an unwritten one in `holes`;
/// adds the verdicts of the written ones to `verdicts` and names in `failed`
/// those with a ✘ (a hole that throws is one: "… runs" ✘, saying what it threw). Every rank gets the
/// same answer (no randomness beyond fixed seeds), so every rank skips the same parts.
HoleStatus check_holes(dpt::Holes& holes, dpt::Verdicts& verdicts);

/// After training: the model's logits at positions before t are unchanged
/// when every token from t on is changed (one held-out window, t = T/2).
void check_causality(dpt::Verdicts& verdicts, const Gpt& model, const Corpus& text);
