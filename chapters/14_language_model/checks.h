/// @file checks.h
/// @brief Chapter 14's verdicts, judged on rank 0: the model against its
/// formulas, the data-parallel steps against one device, what training showed.
#pragma once

#include "ch14_flags.h"
#include "corpus.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"
#include "gpt.h"
#include "lm_training.h"

/// Entropy of the training text's characters taken one at a time (nats):
/// the loss of the best model that ignores context.
double unigram_entropy(const Corpus& text);

/// The model's verdicts before training: its parameter count against the
/// formula, the first loss against ln V.
void add_model_verdicts(dpt::Verdicts& verdicts, const Gpt& model, double first_loss);

/// The run's verdicts: each checked step's averaged gradient against one
/// device's on the global batch, replicas equal at the end, under --sync
/// buckets chapter 05's verdicts on the buckets' schedule (collective: every
/// rank calls it), the held-out loss against the unigram entropy.
void add_run_verdicts(dpt::Context& ctx, dpt::Verdicts& verdicts, const Gpt& replica, const LmRun& run,
                      const Corpus& text, const Ch14Flags& f);
