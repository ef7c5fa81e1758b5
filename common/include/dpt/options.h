/// @file options.h
/// @brief The flags every chapter shares, and the set-up they drive: data,
/// model, saved weights and data.
///
/// Graders and scripts rely on these flags meaning the same thing in every
/// chapter: `--steps --batch --lr --seed --optimizer --model --data --samples
/// --no-shuffle --load-weights --save-weights --save-data --metrics --quiet
/// --help`. A bad value prints one line naming the flag and what it accepts,
/// and the program exits with code 2.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/nn.h"

namespace dpt {

/// Values of the common flags (defaults are the chapters' defaults).
struct Options {
  int64_t steps = 300;            ///< optimizer steps (0: only write --save-* outputs)
  int64_t batch = 32;             ///< samples per step, per rank
  float lr = 0.05f;               ///< learning rate
  uint64_t seed = 42;             ///< seeds data, initial weights, shuffling
  std::string optimizer = "sgd";  ///< sgd | momentum | adam | adamw
  std::string model = "784-256-10";  ///< layer widths
  std::string data = "synthetic";    ///< synthetic | mnist:DIR
  int64_t samples = 4096;         ///< data set size (MNIST: at most this many)
  bool no_shuffle = false;        ///< consecutive slices instead of shuffled epochs
  std::string load_weights;       ///< safetensors to start from
  std::string save_weights;       ///< safetensors to write at the end
  std::string save_data;          ///< safetensors of the data set (x, y)
  std::string metrics;            ///< JSONL file, one object per step
  bool quiet = false;             ///< no narration, no progress bar

  /// Layer widths parsed from `model`.
  std::vector<int64_t> widths() const { return parse_widths(model); }
};

/// Flag validators with one-line messages ("expects a positive integer, got '-3'").
CLI::Validator positive_integer();
/// Accepts 0, 1, 2, …
CLI::Validator non_negative_integer();
/// Accepts any number > 0.
CLI::Validator positive_number();

/// Registers the common flags on `app`, writing into `options`.
void add_common_flags(CLI::App& app, Options& options);

/// Parses argv. `--help` prints the help and exits 0; a bad flag or value
/// prints "<program>: <flag>: <problem> (run with --help)" and exits 2.
void parse_flags(CLI::App& app, int argc, char** argv);

/// Runs a chapter's body: a dpt::Error (bad input found while running)
/// prints "<program>: error: <message>" and returns 1; success returns 0.
int run_guarded(const std::string& program, const std::function<void()>& body);

/// The data set the flags ask for; its features/classes must fit the model.
Dataset load_dataset(const Options& options);

/// The model the flags ask for on `device`: initialised from `--seed`, or
/// loaded from `--load-weights`.
MLP build_model(const Options& options, Device& device);

/// Writes `--save-weights` (the model) and `--save-data` (the data), if asked.
void save_outputs(const Options& options, const MLP& model, const Dataset& data);

}  // namespace dpt
