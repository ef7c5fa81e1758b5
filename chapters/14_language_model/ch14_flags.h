/// @file ch14_flags.h
/// @brief Chapter 14's flags: the model's sizes, the data, training, what to
/// write. Every flag's bound is argued in ch14_flags.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "dpt/cli_fwd.h"
#include "gpt.h"

/// The values of ch14's flags (defaults: nanoGPT's CPU configuration).
struct Ch14Flags {
  std::string data = "auto";  ///< auto | kjv | synthetic | text:FILE (auto: kjv where installed)
  GptShape shape;             ///< --layers --heads --width --context (vocab from the data)
  int64_t batch = 12;         ///< sequences per step, per rank (B)
  int64_t steps = 150;        ///< optimizer steps
  float lr = 1e-3f;           ///< learning rate
  std::string optimizer = "adamw";  ///< sgd | adamw
  float weight_decay = 0.01f;       ///< AdamW's λ (PyTorch's default)
  std::string sync = "buckets";  ///< buckets (chapter 05's, during backward) | library (one all-reduce after it)
  double bucket_mb = 1;          ///< --bucket-mb: each bucket's cap under --sync buckets
  uint64_t seed = 42;         ///< initial weights, shuffling, sampling
  bool no_shuffle = false;    ///< windows in order (the cross-checks' batches)
  int64_t eval_every = 50;    ///< held-out loss every N steps (and at the end)
  int64_t eval_batches = 4;   ///< held-out batches of B windows per evaluation
  int64_t sample = 200;       ///< characters generated after training (0: none)
  std::string prompt;         ///< the sample's start (default: the held-out text's first line)
  std::string load_weights;   ///< safetensors to start from
  std::string save_weights;   ///< safetensors written at the end (nanoGPT's names)
  std::string save_data;      ///< safetensors: tokens (N,) int64 of the training split
  std::string metrics;        ///< JSONL, one object per step
  std::string plot;           ///< SVG: train and held-out loss against steps
  bool quiet = false;         ///< no narration, no progress bar
};

/// Registers the flags on `app`, writing into `flags`.
void add_ch14_flags(CLI::App& app, Ch14Flags& flags);
