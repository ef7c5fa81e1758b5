/// @file outputs.h
/// @brief What chapter 14 writes: weights with their vocabulary, the training
/// tokens, per-step metrics, the loss curve.
#pragma once

#include "ch14_flags.h"
#include "corpus.h"
#include "gpt.h"
#include "lm_training.h"

/// --save-weights (nanoGPT's names; the vocabulary in the metadata),
/// --save-data, --metrics and --plot, each if asked (rank 0).
void write_ch14_outputs(const Ch14Flags& f, const Gpt& model, const Corpus& text, const LmRun& run);
/// --load-weights into `model` (names and shapes checked; the file's
/// vocabulary must be the data's).
void load_ch14_weights(const std::string& path, Gpt& model, const Corpus& text);
