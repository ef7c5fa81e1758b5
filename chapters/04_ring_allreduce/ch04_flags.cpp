// ch04_flags.cpp — chapter 04's flags and their bounds (ch04_flags.h).
#include "ch04_flags.h"

#include "dpt/options.h"

namespace dpt::ch04 {

void add_ch04_flags(CLI::App& app, Ch04Flags& f) {
  app.add_flag("--explain,!--no-explain", f.explain, "Draw the ring step by step on a tiny vector (up to 8 ranks)")
      ->capture_default_str();
  app.add_option("--check-size", f.check_size, "Floats in the sum and traffic checks")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--max-bytes", f.max_bytes, "Largest all-reduce timed (4 KiB, x8, … up to this)")
      ->check(positive_integer())->capture_default_str();
  app.add_option("--reps", f.reps, "Timed repetitions per size (median)")->check(positive_integer())->capture_default_str();
}

}  // namespace dpt::ch04
