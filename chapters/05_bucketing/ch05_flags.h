/// @file ch05_flags.h
/// @brief Chapter 05's own flags (harness, not a hole): registered with their
/// bounds, checked against each other once parsed, turned into the loop's
/// BucketPlan. Every rank must give the same ones (the harness checks),
/// except --overlap/--no-overlap: it changes when a rank launches, not what
/// the ranks exchange.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "bucketed_training.h"
#include "dpt/options.h"

namespace dpt::ch05 {

/// What chapter 05's flags asked for.
struct Ch05Flags {
  double bucket_mb = 1;         ///< --bucket-mb: each bucket's cap
  double first_bucket_mb = -1;  ///< --first-bucket-mb (-1: same as --bucket-mb)
  bool overlap = true;          ///< all-reduce during backward (--no-overlap: after it)
  bool sweep = false;           ///< --sweep-buckets: time several caps
  bool find_unused = false;     ///< --find-unused-parameters
  int64_t accumulate = 1;       ///< --accumulate: micro-batches per step
  int64_t sweep_steps = 10;     ///< steps per cap in the sweep
};

/// Registers --bucket-mb, --first-bucket-mb, --overlap/--no-overlap,
/// --accumulate, --find-unused-parameters, --sweep-buckets and --sweep-steps
/// into `flags`. A value out of bounds (nan, inf, a negative cap, more
/// micro-batches than a teaching run can mean) is refused at parse time:
/// exit 2 with a sentence, like every bad flag. `options` is read for --batch,
/// once every flag is parsed.
void add_ch05_flags(CLI::App& app, Ch05Flags& flags, const Options& options);

/// A bucket cap in MiB: finite, from 0 to a million (refused with a sentence
/// otherwise). Chapter 14's --bucket-mb uses it too.
CLI::Validator bucket_mebibytes();

/// MiB → bytes, rounded.
int64_t mib_to_bytes(double mb);

/// The loop's plan from the flags.
BucketPlan plan_of(const Ch05Flags& flags);

}  // namespace dpt::ch05
