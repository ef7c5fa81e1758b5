/// @file options.h
/// @brief The flags every chapter shares, and the set-up they drive: data,
/// model, saved weights and data.
///
/// Graders and scripts rely on these flags meaning the same thing in every
/// chapter: `--steps --batch --lr --seed --optimizer --model --data --samples
/// --eval-samples --no-shuffle --load-weights --save-weights --save-data
/// --metrics --quiet --help`. A bad value prints one line naming the flag and what it accepts,
/// and the program exits with code 2: not a number, not finite (`--lr inf`),
/// out of range (`--steps 99999999999999999999` overflows; each count has an
/// upper bound beyond which it can only be a typo, argued in options.cpp), or
/// an output path dpt would refuse to write (see output_file.h).
#pragma once

#include "dpt/cli_fwd.h"
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dpt/data.h"
#include "dpt/evaluate.h"
#include "dpt/nn.h"

namespace dpt {

/// Values of the common flags (defaults are the chapters' defaults).
struct Options {
  int64_t steps = 300;            ///< optimizer steps (0: only write --save-* outputs)
  int64_t batch = 32;             ///< samples per step, per rank
  float lr = 0.05f;               ///< learning rate
  uint64_t seed = 42;             ///< seeds data, initial weights, shuffling
  std::string optimizer = "sgd";  ///< sgd | momentum | adam | adamw | lars | lamb
  std::string model = "784-256-10";  ///< layer widths
  std::string data = "auto";  ///< auto | synthetic | fashion-mnist | fashion-mnist:DIR | mnist:DIR (auto: data_source)
  int64_t samples = 4096;         ///< data set size (image sets: at most this many)
  int64_t eval_samples = 10000;   ///< held-out samples (image sets: at most this many of the test split; 0: none)
  bool no_shuffle = false;        ///< consecutive slices instead of shuffled epochs
  std::string load_weights;       ///< safetensors to start from
  std::string save_weights;       ///< safetensors to write at the end
  std::string save_data;          ///< safetensors of the data set (x, y)
  std::string metrics;            ///< JSONL file, one object per step
  bool quiet = false;             ///< no narration, no progress bar
  /// none | local | sync: a BatchNorm after each hidden Linear (chapters that
  /// take --batchnorm; see add_batch_norm_flag). local: each rank's batch's
  /// statistics; sync: the global batch's (the chapter combines them).
  std::string batchnorm = "none";

  /// Layer widths parsed from `model`.
  std::vector<int64_t> widths() const { return parse_widths(model); }
};

class Communicator;

/// A CLI11 validator from `check`, which throws dpt::Error with a sentence on
/// a bad value (CLI11 puts the flag's name in front of it): dpt's validators
/// below are made with it, and a program's own value checks may be too.
CLI::Validator validator_of(const std::string& description, std::function<void(const std::string&)> check,
                            const std::string& name = "");
/// Accepts a decimal integer in [minimum, maximum]; too many digits is an
/// error, never a saturated value ("expects an integer from 1 to 1048576, got '0'").
CLI::Validator integer_in(uint64_t minimum, uint64_t maximum);
/// Accepts a finite number in (minimum_excluded, maximum]; `inf` and `nan` are refused.
CLI::Validator number_in(double minimum_excluded, double maximum);
/// Accepts a finite number in [minimum, maximum] ("expects a finite number
/// from 0 to 0.999, got 'nan'"). These validators are dpt's sentence on every
/// CLI11 version; CLI::Range lets NaN through and words its refusal per version.
CLI::Validator number_from(double minimum, double maximum);
/// Accepts 1, 2, … up to 2^63 − 1.
CLI::Validator positive_integer();
/// Accepts 0, 1, 2, … up to 2^63 − 1.
CLI::Validator non_negative_integer();
/// Accepts any finite number > 0.
CLI::Validator positive_number();
/// Accepts a path dpt may write under the output policy (output_file.h): its
/// directory exists and is writable, and it is not a symlink, directory, FIFO,
/// socket or block device. A flag checked with it is an output: parse_flags
/// refuses it on the path of another output or of an input.
CLI::Validator output_path();
/// Registers an output flag, `flag FILE`, written into `path`: checked at
/// parse time under the output policy and against every other output and
/// input (one line, exit 2), and written with the run's other outputs at its
/// end (OutputRun). The one way a program adds a file it writes:
///
///     add_output(app, "--gantt", flags.gantt, "SVG: the Gantt chart of one step per schedule");
CLI::Option* add_output(CLI::App& app, const std::string& flag, std::string& path, const std::string& help);
/// True when `option` names a file the program writes (add_output, or checked
/// with output_path()): rank-local under mpirun, since rank 0 alone writes.
bool is_output(CLI::Option* option);

/// Registers the common flags on `app`, writing into `options`.
void add_common_flags(CLI::App& app, Options& options);
/// Narrows add_common_flags' --optimizer to `names` for a chapter whose checks
/// hold only for those (LARS and LAMB need whole layers and bring their own
/// state); `why` ends its --help line. Call after add_common_flags.
void limit_optimizers(CLI::App& app, const std::vector<std::string>& names, const std::string& why);
/// Registers `--batchnorm none|local|sync` (Options::batchnorm) for a chapter
/// whose model can carry batch norm; refuses it (exit 2) with --batch 1,
/// since training-mode batch norm needs 2 rows.
CLI::Option* add_batch_norm_flag(CLI::App& app, Options& options);

/// Parses argv. `--help` prints the help and exits 0; a bad flag or value
/// prints "<program>: <flag>: <problem> (run with --help)" and exits 2, and so
/// does an output (add_output) on the path of another output or of an input
/// (--load-weights, --data's directory, --resume, --consolidate).
void parse_flags(CLI::App& app, int argc, char** argv);

/// Runs a chapter's body: a dpt::Error (bad input found while running)
/// prints "<program>: error: <message>" and returns 1; success returns 0.
/// The body's outputs are one OutputRun (output_file.h): published when it
/// returns, all removed when it throws, so a failed run changes no file.
int run_guarded(const std::string& program, const std::function<void()>& body);

/// What --data means: itself, except "auto" (the default), which is
/// "fashion-mnist" when Debian's dataset-fashion-mnist is installed and the
/// model takes its 784 pixels to 10 classes, else "synthetic". So a chapter
/// run as the docs show trains on real images wherever they are installed.
std::string data_source(const Options& options);

/// The training set the flags ask for; its features/classes must fit the model.
Dataset load_dataset(const Options& options);

/// The held-out set for `train` (load_dataset's): the first --eval-samples
/// images of the test split (t10k files) of an image set; for synthetic data,
/// min(--eval-samples, --samples) points from the training set's teacher with
/// inputs drawn from another seed (make_synthetic_held_out; as many as the
/// training set keeps the default run fast). Empty with --eval-samples 0.
/// Never shares a sample with `train` (image sets: other files).
HeldOut load_held_out(const Options& options, const Dataset& train);

/// The model the flags ask for on `device`: initialised from `--seed`, or
/// loaded from `--load-weights` (MLP::named_state: batch norm's running
/// statistics too when --batchnorm is on); batch norm unless --batchnorm none.
MLP build_model(const Options& options, Device& device);

/// Writes `--save-weights` (the model) and `--save-data` (the data), if asked.
void save_outputs(const Options& options, const MLP& model, const Dataset& data);

/// Collective, once at start-up on every rank: checks that every rank was
/// started with the same training flags (--steps --batch --lr --seed
/// --optimizer --model --data --samples --no-shuffle) and holds the same data
/// set (a 64-bit hash of x, y and classes). Under mpirun each process parses
/// its own command line, so `mpirun -np 1 prog --batch 8 : -np 1 prog --batch
/// 16` would otherwise train silently with wrong weights. On a mismatch every
/// rank throws dpt::Error with the same line, naming the first (lowest) rank
/// that differs from rank 0 and both values: "rank 1 was started with --batch
/// 16, rank 0 with --batch 8". Output paths and --quiet may differ (rank 0
/// alone writes and talks); --load-weights may differ in path (the chapters
/// broadcast rank 0's weights). `chapter_flags`: a chapter's own flags that
/// must agree too, as (flag, value) pairs in the same order on every rank
/// (ch07: {"--stage", "3"}, …), named the same way on a mismatch.
void check_ranks_agree(Communicator& comm, const Options& options, const Dataset& data,
                       const std::vector<std::pair<std::string, std::string>>& chapter_flags = {});

}  // namespace dpt
