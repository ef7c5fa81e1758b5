// options.cpp — the common flags and the set-up they drive.
#include "dpt/options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>

#include "dpt/checkpoint.h"
#include "dpt/check.h"
#include "dpt/launch.h"
#include "dpt/output_file.h"
#include "dpt/report.h"
#include "dpt/text_corpus.h"

namespace dpt {

CLI::Validator validator_of(const std::string& description, std::function<void(const std::string&)> check,
                            const std::string& name) {
  return CLI::Validator(
      [check](std::string& value) -> std::string {
        try {
          check(value);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      description, name);
}

namespace {

// The name output_path()'s validator carries: how check_distinct_paths finds
// every output flag of a program, the harness's and the chapter's alike.
const char* const kOutputValidator = "dpt output path";

// Digits only (an optional '+'), no overflow: "99999999999999999999" is an
// error, never 2^63 − 1. Returns false when `text` is not such a number.
bool parse_unsigned(const std::string& text, uint64_t* value) {
  std::size_t at = !text.empty() && text[0] == '+' ? 1 : 0;
  if (at == text.size()) return false;
  uint64_t v = 0;
  for (; at < text.size(); ++at) {
    if (text[at] < '0' || text[at] > '9') return false;
    uint64_t digit = uint64_t(text[at] - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *value = v;
  return true;
}

// ---- the upper bounds: values beyond them can only be typos ----
// --steps: one step of the smallest model takes ~10 µs, so 10^9 steps is
// hours of a teaching run; the chapters use hundreds.
constexpr uint64_t kMaxSteps = 1000000000;
// --batch (per rank): 2^20 samples × the default model's 1050 activations per
// sample is over 4 GB of activations, more than a teaching machine has.
constexpr uint64_t kMaxBatch = uint64_t(1) << 20;
// --samples: MNIST has 60000; 10^8 samples of even 8 features is 3.2 GB.
constexpr uint64_t kMaxSamples = 100000000;
// --lr: inputs are standardised, so a step of lr × gradient with lr above 100
// diverges on every model here; the chapters use 0.001–0.5.
constexpr double kMaxLr = 100;
// --model: 2^28 parameters are 1 GiB of float32 weights (4 GiB with gradients
// and Adam's two moments); the default 784-256-10 has 203,530.
constexpr double kMaxParameters = double(uint64_t(1) << 28);
// Data set bytes (samples × input width × 4): above 8 GiB it cannot be meant.
constexpr double kMaxDataBytes = double(uint64_t(8) << 30);

std::string model_for(const std::vector<int64_t>& widths, int64_t inputs, int64_t outputs) {
  std::string spec = std::to_string(inputs);
  for (std::size_t i = 1; i + 1 < widths.size(); ++i) spec += "-" + std::to_string(widths[i]);
  return spec + "-" + std::to_string(outputs);
}

bool fashion_mnist_installed() {
  for (const char* split : {"/train-images-idx3-ubyte.gz", "/t10k-images-idx3-ubyte.gz"})
    if (::access((std::string(kFashionMnistDir) + split).c_str(), R_OK) != 0) return false;
  return true;
}

// Cross-flag sizes, checked once every flag is parsed (exit 2, like a bad value).
void check_sizes(const Options& o) {
  std::vector<int64_t> w = o.widths();
  double parameters = 0;
  for (std::size_t i = 0; i + 1 < w.size(); ++i) parameters += double(w[i]) * double(w[i + 1]) + double(w[i + 1]);
  if (parameters > kMaxParameters)
    throw CLI::ValidationError("--model", o.model + " has " + fmt(parameters, 3) +
                                              " parameters, more than the 2^28 a teaching run can mean");
  double data_bytes = double(o.samples) * double(w.front()) * 4;
  if (o.data == "synthetic" && data_bytes > kMaxDataBytes)
    throw CLI::ValidationError("--samples", std::to_string(o.samples) + " samples of " + std::to_string(w.front()) +
                                                " features are " + fmt(data_bytes / double(1 << 30), 3) +
                                                " GiB of data, more than the 8 GiB a teaching run can mean");
  if (o.batchnorm != "none" && o.batch < 2)
    throw CLI::ValidationError("--batchnorm", o.batchnorm + " needs --batch 2 or more: training-mode batch norm "
                                                            "takes a variance over each rank's rows");
}

// A --load-weights file made with batch norm loaded into a model without it,
// or the reverse: one line naming which (exit 2), before any rank loads it. A
// file that cannot be read is left to the load, which names what is wrong.
void check_weights_batch_norm(const Options& o) {
  if (o.load_weights.empty()) return;
  std::string first_norm;
  try {
    for (const auto& [name, tensor] : read_safetensors(o.load_weights).tensors)
      if (name.rfind("bn", 0) == 0 && first_norm.empty()) first_norm = name;
  } catch (const Error&) {
    return;
  }
  if (o.batchnorm == "none" && !first_norm.empty())
    throw CLI::ValidationError("--load-weights", "'" + o.load_weights + "' holds batch-norm parameters (" + first_norm +
                                                     "): made with --batchnorm? this run's model has none");
  if (o.batchnorm != "none" && first_norm.empty())
    throw CLI::ValidationError("--load-weights", "'" + o.load_weights + "' holds no batch-norm parameters: made without "
                                                 "--batchnorm? this run's model (--batchnorm " + o.batchnorm + ") has them");
}
}  // namespace

CLI::Validator integer_in(uint64_t minimum, uint64_t maximum) {
  std::string range = "an integer from " + std::to_string(minimum) + " to " + std::to_string(maximum);
  if (maximum == uint64_t(INT64_MAX) && minimum <= 1) range = minimum == 1 ? "a positive integer" : "a non-negative integer";
  return validator_of("INT", [=](const std::string& v) {
    uint64_t value = 0;
    bool number = parse_unsigned(v, &value);
    bool too_many_digits = !number && v.find_first_of("0123456789") != std::string::npos &&
                           v.find_first_not_of("+0123456789") == std::string::npos;
    DPT_CHECK(number && value >= minimum && value <= maximum,
              "expects " << range << ", got '" << v << "'" << (too_many_digits ? " (too large)" : ""));
  });
}

CLI::Validator number_in(double minimum_excluded, double maximum) {
  std::ostringstream text;
  text << "a finite number above " << minimum_excluded;
  if (maximum < std::numeric_limits<double>::max()) text << " and at most " << maximum;
  return validator_of("NUMBER", [=, range = text.str()](const std::string& v) {
    char* end = nullptr;
    double value = v.empty() ? 0 : std::strtod(v.c_str(), &end);
    bool ok = !v.empty() && end == v.c_str() + v.size() && std::isfinite(value) && value > minimum_excluded &&
              value <= maximum;
    DPT_CHECK(ok, "expects " << range << ", got '" << v << "'");
  });
}

CLI::Validator number_from(double minimum, double maximum) {
  std::ostringstream text;
  text << "a finite number from " << minimum << " to " << maximum;
  return validator_of("NUMBER", [=, range = text.str()](const std::string& v) {
    char* end = nullptr;
    double value = v.empty() ? 0 : std::strtod(v.c_str(), &end);
    bool ok = !v.empty() && end == v.c_str() + v.size() && std::isfinite(value) && value >= minimum && value <= maximum;
    DPT_CHECK(ok, "expects " << range << ", got '" << v << "'");
  });
}

CLI::Validator positive_integer() { return integer_in(1, uint64_t(INT64_MAX)); }
CLI::Validator non_negative_integer() { return integer_in(0, uint64_t(INT64_MAX)); }
CLI::Validator positive_number() { return number_in(0, std::numeric_limits<double>::max()); }
CLI::Validator output_path() {
  return validator_of(
      "",  // add_output names the type: --help shows "--plot FILE"
      [](const std::string& v) {
        std::string problem = output_path_problem(v);
        DPT_CHECK(problem.empty(), problem);
      },
      kOutputValidator);
}

CLI::Option* add_output(CLI::App& app, const std::string& flag, std::string& path, const std::string& help) {
  return app.add_option(flag, path, help)->type_name("FILE")->check(output_path());
}

void limit_optimizers(CLI::App& app, const std::vector<std::string>& names, const std::string& why) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : " | ") + name;
  CLI::Option* option = app.get_option("--optimizer");
  option->get_validator("optimizers")->active(false);  // so a refusal lists this chapter's names
  const CLI::Validator member = CLI::IsMember(names);
  option->check(CLI::Validator(  // IsMember's sentence, then why: "lion not in {sgd,adam}: ZeRO shards Adam's m and v"
                    [member, why](std::string& value) mutable {
                      const std::string refused = member(value);
                      return refused.empty() ? refused : refused + ": " + why;
                    },
                    member.get_description()))
      ->description(list + " (" + why + ")");
}

void add_common_flags(CLI::App& app, Options& o) {
  app.add_option("--steps", o.steps, "Optimizer steps (0: only write --save-* outputs)")
      ->check(integer_in(0, kMaxSteps))->capture_default_str();
  app.add_option("--batch", o.batch, "Samples per step, per rank")
      ->check(integer_in(1, kMaxBatch))->capture_default_str();
  app.add_option("--lr", o.lr, "Learning rate")->check(number_in(0, kMaxLr))->capture_default_str();
  app.add_option("--seed", o.seed, "Seed for data, initial weights and shuffling")
      ->check(integer_in(0, UINT64_MAX))->capture_default_str();
  app.add_option("--optimizer", o.optimizer,
                 "sgd | momentum | adam | adamw | lars | lamb (lars, lamb: a step per layer scaled by a trust ratio)")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adamw", "lars", "lamb"}), "optimizers")
      ->capture_default_str();
  app.add_option("--model", o.model, "Layer widths, e.g. 784-256-10")
      ->check(validator_of("WIDTHS", [](const std::string& v) { parse_widths(v); }))
      ->capture_default_str();
  app.add_option("--data", o.data,
                 "auto (Fashion-MNIST where installed and the model is 784-…-10, else synthetic) | synthetic | "
                 "fashion-mnist (Debian's dataset-fashion-mnist) | fashion-mnist:DIR | mnist:DIR (IDX files, plain or .gz)")
      ->check(validator_of("DATA", [](const std::string& v) {
        if (v != "synthetic" && v != "auto") parse_image_source(v);
      }))
      ->capture_default_str();
  app.add_option("--samples", o.samples, "Training set size (image sets: at most this many)")
      ->check(integer_in(1, kMaxSamples))->capture_default_str();
  app.add_option("--eval-samples", o.eval_samples,
                 "Held-out samples scored at the end (image sets: at most this many of the test split; 0: none)")
      ->check(integer_in(0, kMaxSamples))->capture_default_str();
  app.add_flag("--no-shuffle", o.no_shuffle, "Consecutive slices of the data, wrapping at its end");
  app.add_option("--load-weights", o.load_weights, "Start from these weights (safetensors)")
      ->check(CLI::ExistingFile);
  // Output paths are checked now, not after training (policy: output_file.h).
  add_output(app, "--save-weights", o.save_weights, "Write the final weights (safetensors: fc0.weight, …)");
  add_output(app, "--save-data", o.save_data, "Write the data set (safetensors: x (N,D) f32, y (N,) i64)");
  add_output(app, "--metrics", o.metrics, "Write per-step metrics (JSONL)");
  app.add_flag("--quiet", o.quiet, "No narration and no progress bar (summary only)");
  app.parse_complete_callback([&o] {
    o.data = data_source(o);  // every rank, report and check sees what auto chose
    check_sizes(o);
    check_weights_batch_norm(o);
  });
}

CLI::Option* add_batch_norm_flag(CLI::App& app, Options& o) {
  CLI::Option* flag =
      app.add_option("--batchnorm", o.batchnorm,
                     "none | local | sync: a BatchNorm after each hidden Linear; local normalizes by each rank's "
                     "batch, sync by the global batch")
          ->check(CLI::IsMember({"none", "local", "sync"}))->capture_default_str();
  return flag;  // --batch 1 is refused by check_sizes, which add_common_flags' callback runs
}

namespace {
// The flags dpt's programs read files with. What a run writes is every flag
// checked with output_path() (add_output). (--save-checkpoint is neither: a
// run may resume from and save into one directory.)
const char* const kInputFlags[] = {"--load-weights", "--data", "--resume", "--consolidate"};

std::vector<NamedPath> given_inputs(const CLI::App& app) {
  std::vector<NamedPath> paths;
  for (const char* flag : kInputFlags) {
    const CLI::Option* option = app.get_option_no_throw(flag);
    if (!option || option->count() == 0) continue;
    std::string value = option->as<std::string>();
    if (std::string(flag) == "--data") {  // an image set's directory, a text's file; synthetic and kjv read none of the run's paths
      if (value == "synthetic" || value == "auto" || value == "kjv") continue;
      value = text_source_file(value).empty() ? parse_image_source(value).dir : text_source_file(value);
    }
    paths.push_back({flag, value});
  }
  return paths;
}

// Every output flag given, in the order the program registered them.
std::vector<NamedPath> given_outputs(CLI::App& app) {
  std::vector<NamedPath> paths;
  for (CLI::Option* option : app.get_options())
    if (option->count() > 0 && is_output(option)) paths.push_back({option->get_name(), option->as<std::string>()});
  return paths;
}

// --ranks beyond what threads can run (launch.h, kMaxThreadRanks): refused at
// parse time (exit 2), not after the data is loaded.
void check_thread_ranks(const CLI::App& app) {
  const CLI::Option* ranks = app.get_option_no_throw("--ranks");
  const CLI::Option* comm = app.get_option_no_throw("--comm");
  if (!ranks || ranks->count() == 0) return;
  std::string problem = thread_ranks_problem(ranks->as<int64_t>(), comm && comm->count() ? comm->as<std::string>()
                                                                                        : std::string("threads"));
  if (!problem.empty()) throw CLI::ValidationError("--ranks", problem);
}

// An output that is an input or another output: refused before any work (exit 2).
void check_distinct_paths(CLI::App& app) {
  std::string problem = distinct_paths_problem(given_outputs(app), given_inputs(app));
  if (!problem.empty()) throw CLI::ValidationError(problem);
}
}  // namespace

bool is_output(CLI::Option* option) {
  try {
    option->get_validator(kOutputValidator);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

void parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    check_thread_ranks(app);
    check_distinct_paths(app);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help
    print_error_line(app.get_name() + ": " + e.what() + " (run with --help)");
    std::exit(2);
  }
}

int run_guarded(const std::string& program, const std::function<void()>& body) {
  try {
    OutputRun outputs;  // every file the body writes appears at the end, or none does
    body();
    outputs.publish();
    return 0;
  } catch (const Error& e) {
    std::cout.flush();  // what was printed so far lands above the error, also through a pipe (the tour's tee)
    print_error_line(program + ": error: " + e.what());
  } catch (const std::exception& e) {
    std::cout.flush();
    print_error_line(program + ": internal error: " + e.what());
  }
  return 1;
}

namespace {
// An image set's split, checked against --model.
Dataset load_image_split(const Options& o, const std::string& split, int64_t limit) {
  std::vector<int64_t> widths = o.widths();
  ImageSource source = parse_image_source(o.data);
  Dataset data = load_images(source, split, limit);
  DPT_CHECK(widths.front() == data.features() && widths.back() == data.classes,
            "--model " << o.model << " does not fit " << source.name << ": it needs " << data.features()
                       << " inputs and " << data.classes << " outputs, e.g. --model "
                       << model_for(widths, data.features(), data.classes));
  return data;
}
}  // namespace

std::string data_source(const Options& o) {
  if (o.data != "auto") return o.data;
  std::vector<int64_t> widths = o.widths();
  bool fits = widths.front() == 28 * 28 && widths.back() == 10;
  return fits && fashion_mnist_installed() ? "fashion-mnist" : "synthetic";
}

Dataset load_dataset(const Options& options) {
  Options o = options;
  o.data = data_source(options);
  std::vector<int64_t> widths = o.widths();
  if (o.data == "synthetic") return make_synthetic(o.samples, widths.front(), widths.back(), o.seed);
  return load_image_split(o, "train", o.samples);
}

HeldOut load_held_out(const Options& options, const Dataset& train) {
  Options o = options;
  o.data = data_source(options);
  HeldOut held_out;
  if (o.eval_samples == 0) return held_out;
  if (o.data == "synthetic") {
    held_out.data = make_synthetic_held_out(train, std::min(o.eval_samples, o.samples), o.seed);
    held_out.description = std::to_string(held_out.data.size()) + " synthetic, same teacher, new inputs";
    return held_out;
  }
  held_out.data = load_image_split(o, "t10k", o.eval_samples);
  held_out.description = parse_image_source(o.data).name + " test split (t10k), " +
                         std::to_string(held_out.data.size()) + " images";
  return held_out;
}

MLP build_model(const Options& o, Device& device) {
  Rng rng(o.seed);
  MLP model(o.widths(), device, rng, o.batchnorm != "none");
  if (!o.load_weights.empty()) load_weights(o.load_weights, model.named_state());
  return model;
}

void save_outputs(const Options& o, const MLP& model, const Dataset& data) {
  if (!o.save_weights.empty()) save_weights(o.save_weights, model.named_state());
  if (!o.save_data.empty()) save_dataset(o.save_data, data);
}

}  // namespace dpt
