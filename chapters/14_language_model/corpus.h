/// @file corpus.h
/// @brief The text a GPT learns from, as characters: the vocabulary, the
/// training and held-out tokens, and the windows each step takes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

/// A text split for training, its characters numbered.
struct TextData {
  std::string name;                ///< what --data read ("kjv", "synthetic", "text:FILE")
  std::string vocabulary;          ///< token i is the byte vocabulary[i] (sorted)
  std::vector<int64_t> train;      ///< the first 90 %
  std::vector<int64_t> held_out;   ///< the last 10 %
};

/// The text --data names, split 90/10, tokens numbered by `vocabulary`.
TextData load_text(const std::string& data, uint64_t seed);
/// Tokens → text.
std::string decode(const TextData& text, const std::vector<int64_t>& tokens);
/// Text → tokens; a character outside the vocabulary is an error naming it.
std::vector<int64_t> encode(const TextData& text, const std::string& characters);

/// The held-out text's first whole line (its first 40 characters at most),
/// starting after the first line break; the sample's prompt by default.
std::string default_prompt(const TextData& text);

/// `count` windows of T + 1 tokens: inputs (count·T) and targets (the same,
/// shifted by one).
struct Windows {
  std::vector<int64_t> inputs;   ///< count·T tokens, window after window
  std::vector<int64_t> targets;  ///< the same positions' next tokens
};
/// Windows g = first … first + count − 1 of step s's global batch of G:
/// in order (--no-shuffle) window g starts at ((s·G + g)·T) mod (N − T − 1);
/// shuffled, at a position drawn from (seed, s, g) alone, so every replica
/// computes the global batch's windows without talking.
Windows step_windows(const std::vector<int64_t>& tokens, int64_t step, int64_t global, int64_t first, int64_t count,
                     int64_t T, bool shuffle, uint64_t seed);
