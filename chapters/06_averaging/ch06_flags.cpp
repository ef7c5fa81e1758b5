// ch06_flags.cpp — chapter 06's flags and their bounds (ch06_flags.h).
#include "ch06_flags.h"

#include "dpt/options.h"

namespace dpt::ch06 {

void add_ch06_flags(CLI::App& app, Ch06Flags& flags) {
  app.add_option("--average", flags.average, "What to average: grads (every step) or params (every H steps)")
      ->check(CLI::IsMember({"grads", "params"}))->capture_default_str();
  app.add_option("--every", flags.schedule.every, "H: average parameters once every H steps")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--warmup-steps", flags.schedule.warmup, "W: average gradients for the first W steps, then parameters")
      ->check(non_negative_integer())->capture_default_str();
  app.add_flag("--average-state", flags.schedule.average_state, "Average the optimizer state with the parameters (default: local)");
  app.add_flag("--compare,!--no-compare", flags.compare,
               "Also train grads vs params at H=1 for sgd, momentum, adam and compare (default on)")
      ->capture_default_str();
  app.add_option("--adam-lr", flags.adam_lr, "Learning rate of the Adam and LAMB runs (their step is ~lr per weight)")
      ->check(positive_number())->capture_default_str();
  app.add_option("--equivalence-steps", flags.equivalence_steps, "Steps of the H=1 comparisons (at most --steps)")
      ->check(positive_integer())->capture_default_str();
}

}  // namespace dpt::ch06
