// options.cpp — the common flags and the set-up they drive.
#include "dpt/options.h"

#include <iostream>

#include "dpt/checkpoint.h"
#include "dpt/check.h"

namespace dpt {

namespace {
// A CLI11 validator from a function that throws dpt::Error on a bad value.
CLI::Validator validator(const std::string& description, std::function<void(const std::string&)> check) {
  return CLI::Validator(
      [check](std::string& value) -> std::string {
        try {
          check(value);
        } catch (const Error& e) {
          std::string what = e.what();
          auto colon = what.find(": ");  // drop "file:line: "
          return colon == std::string::npos ? what : what.substr(colon + 2);
        }
        return "";
      },
      description);
}
// "expects a positive integer, got '-3'" instead of CLI11's range dump.
CLI::Validator number_at_least(double minimum, bool integer) {
  std::string kind = std::string(minimum > 0 ? "a positive" : "a non-negative") + (integer ? " integer" : " number");
  return validator(integer ? "INT" : "NUMBER", [=](const std::string& v) {
    std::size_t used = 0;
    double value = 0;
    try {
      value = std::stod(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    bool ok = used == v.size() && !v.empty() && value >= minimum && (minimum <= 0 || value > 0);
    if (integer) ok = ok && v.find_first_not_of("0123456789+") == std::string::npos;
    DPT_CHECK(ok, "expects " << kind << ", got '" << v << "'");
  });
}
}  // namespace

CLI::Validator positive_integer() { return number_at_least(1, true); }
CLI::Validator non_negative_integer() { return number_at_least(0, true); }
CLI::Validator positive_number() { return number_at_least(1e-300, false); }

void add_common_flags(CLI::App& app, Options& o) {
  app.add_option("--steps", o.steps, "Optimizer steps (0: only write --save-* outputs)")
      ->check(non_negative_integer())->capture_default_str();
  app.add_option("--batch", o.batch, "Samples per step, per rank")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--lr", o.lr, "Learning rate")->check(positive_number())->capture_default_str();
  app.add_option("--seed", o.seed, "Seed for data, initial weights and shuffling")->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd | momentum | adam | adamw")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adamw"}))->capture_default_str();
  app.add_option("--model", o.model, "Layer widths, e.g. 784-256-10")
      ->check(validator("WIDTHS", [](const std::string& v) { parse_widths(v); }))
      ->capture_default_str();
  app.add_option("--data", o.data, "synthetic | mnist:DIR (un-gzipped IDX files)")
      ->check(validator("DATA", [](const std::string& v) {
        DPT_CHECK(v == "synthetic" || (v.rfind("mnist:", 0) == 0 && v.size() > 6),
                  "expected synthetic or mnist:DIR, got '" << v << "'");
      }))
      ->capture_default_str();
  app.add_option("--samples", o.samples, "Data set size (MNIST: at most this many)")
      ->check(positive_integer())->capture_default_str();
  app.add_flag("--no-shuffle", o.no_shuffle, "Consecutive slices of the data, wrapping at its end");
  app.add_option("--load-weights", o.load_weights, "Start from these weights (safetensors)")
      ->check(CLI::ExistingFile);
  app.add_option("--save-weights", o.save_weights, "Write the final weights (safetensors: fc0.weight, …)");
  app.add_option("--save-data", o.save_data, "Write the data set (safetensors: x (N,D) f32, y (N,) i64)");
  app.add_option("--metrics", o.metrics, "Write per-step metrics (JSONL)");
  app.add_flag("--quiet", o.quiet, "No narration and no progress bar (summary only)");
}

void parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help
    std::cerr << app.get_name() << ": " << e.what() << " (run with --help)\n";
    std::exit(2);
  }
}

int run_guarded(const std::string& program, const std::function<void()>& body) {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << program << ": internal error: " << e.what() << "\n";
  }
  return 1;
}

Dataset load_dataset(const Options& o) {
  std::vector<int64_t> widths = o.widths();
  if (o.data == "synthetic") return make_synthetic(o.samples, widths.front(), widths.back(), o.seed);
  Dataset data = load_mnist(o.data.substr(6), o.samples);
  DPT_CHECK(widths.front() == data.features() && widths.back() == data.classes,
            "--model " << o.model << " does not fit MNIST: it needs " << data.features()
                       << " inputs and " << data.classes << " outputs, e.g. --model 784-256-10");
  return data;
}

MLP build_model(const Options& o, Device& device) {
  Rng rng(o.seed);
  MLP model(o.widths(), device, rng);
  if (!o.load_weights.empty()) load_weights(o.load_weights, model.named_parameters());
  return model;
}

void save_outputs(const Options& o, const MLP& model, const Dataset& data) {
  if (!o.save_weights.empty()) save_weights(o.save_weights, model.named_parameters());
  if (!o.save_data.empty()) save_dataset(o.save_data, data);
}

}  // namespace dpt
