// options.cpp — chapter 10's flags and their checks (options.h). Every bad
// value or combination is one sentence naming the flag, exit 2.
#include "options.h"

#include <CLI/CLI.hpp>

#include "dpt/check.h"

namespace dpt::ch10 {

namespace {
// The weight and bias shapes of --model, before any replica exists.
std::vector<Shape> model_shapes(const Options& options) {
  std::vector<Shape> shapes;
  const std::vector<int64_t> widths = options.widths();
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) shapes.push_back({widths[i + 1], widths[i]}), shapes.push_back({widths[i + 1]});
  return shapes;
}

// A compressor spec the model cannot take is the flag's error, not the run's.
void check_spec(const std::string& flag, const std::string& spec, const std::vector<Shape>& shapes) {
  try {
    make_compressor(spec, shapes, 0);
  } catch (const Error& e) {
    throw CLI::ValidationError(flag, e.what());
  }
}

// A flag the mode would drop in silence is refused instead.
void refuse_in_mode(const CLI::App& app, const std::string& flag, const std::string& mode, const std::string& why) {
  if (app.count(flag) > 0) throw CLI::ValidationError(flag, "not used by --mode " + mode + ": " + why);
}
}  // namespace

void add_ch10_flags(CLI::App& app, Options& options, Ch10Flags& flags) {
  app.add_option("--compress", flags.mine.compress, "none | fp16 | bf16 | topk:K | sign | powersgd:R")->capture_default_str();
  app.add_flag("--error-feedback", flags.mine.error_feedback, "Carry what a message left out into the next step");
  app.add_flag("--compare,!--no-compare", flags.compare,
               "Also train every compressor with and without error feedback (default on)")->capture_default_str();
  app.add_option("--tour-rank", flags.tour_rank, "R of the tour's PowerSGD")->check(positive_integer())->capture_default_str();
  add_output(app, "--plot", flags.plot, "SVG: held-out accuracy against bytes per step");
  app.add_option("--mode", flags.mode, "compress: compressed gradients every step, and DiLoCo's laws; diloco: H local steps, "
                 "then an outer step, against data parallelism")->check(CLI::IsMember({"compress", "diloco"}))->capture_default_str();
  app.add_option("--inner-steps", flags.diloco.inner_steps, "DiLoCo's H: inner steps per outer step (divides --steps; --mode diloco)")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--outer-lr", flags.diloco.outer_lr, "DiLoCo's outer learning rate, 0 < lr <= 2 (2 reflects theta_0 through the mean)")
      ->check(number_in(0, kMaxOuterLr))->capture_default_str();
  app.add_option("--outer-momentum", flags.diloco.outer_momentum, "DiLoCo's outer Nesterov momentum, 0 <= mu <= 0.999")
      ->check(number_from(0, 0.999))->capture_default_str();
  app.add_option("--equivalence-steps", flags.equivalence_steps, "Steps of DiLoCo's H=1 comparison with data parallelism")
      ->check(positive_integer())->capture_default_str();
  app.final_callback([&app, &flags, &options] {  // once every flag is known
    const CLI::Option* ranks = app.get_option_no_throw("--ranks");
    const CLI::Option* comm = app.get_option_no_throw("--comm");
    if (ranks && ranks->count() > 0 && (!comm || comm->as<std::string>() == "threads") && ranks->as<int>() > kMaxThreadRanks)
      throw CLI::ValidationError("--ranks", ranks->as<std::string>() + " rank threads: ch10 runs at most " +
                                                std::to_string(kMaxThreadRanks) + " (top-k and sign all-gather, so each "
                                                "rank decodes n messages: n^2 Psi work on this machine; use mpirun beyond)");
    if (flags.mode == "diloco") {
      const std::string why = "DiLoCo sends its parameters uncompressed, once per outer step";
      for (const char* flag : {"--compress", "--error-feedback", "--tour-rank", "--plot"}) refuse_in_mode(app, flag, "diloco", why);
      if (options.steps % flags.diloco.inner_steps != 0)
        throw CLI::ValidationError("--inner-steps", std::to_string(flags.diloco.inner_steps) + " does not divide --steps " +
                                                        std::to_string(options.steps) + ": a run ends with an outer step");
      return;
    }
    refuse_in_mode(app, "--inner-steps", "compress", "its DiLoCo section holds the outer step to its laws at H = 1");
    if (!flags.compare)
      for (const char* flag : {"--outer-lr", "--outer-momentum", "--equivalence-steps"})
        refuse_in_mode(app, flag, "compress --no-compare", "DiLoCo's laws run at the end of the tour");
    const std::vector<Shape> shapes = model_shapes(options);
    check_spec("--compress", flags.mine.compress, shapes);
    if (flags.compare) check_spec("--tour-rank", "powersgd:" + std::to_string(flags.tour_rank), shapes);
  });
}

}  // namespace dpt::ch10
