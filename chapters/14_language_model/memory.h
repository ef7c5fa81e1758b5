/// @file memory.h
/// @brief Chapter 14's memory per rank: parameters, gradients, optimizer
/// state and activations, next to their formulas.
#pragma once

#include "ch14_flags.h"
#include "dpt/report.h"
#include "gpt.h"
#include "lm_training.h"

/// Bytes of the attention probabilities one forward keeps for backward:
/// L blocks × B·H·T² floats (the softmax's output, which its backward and
/// the product with v both need).
double attention_probability_bytes(const GptShape& shape, int64_t batch);

/// The table: each kind's bytes per rank and the formula it follows; the
/// activations measured on the ledger during step 0's forward, the attention
/// probabilities' share of them by formula.
dpt::Table memory_table(const Gpt& model, const Ch14Flags& f, const LmRun& run);
