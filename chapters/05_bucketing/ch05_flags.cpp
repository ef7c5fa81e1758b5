// ch05_flags.cpp — chapter 05's flags, their bounds, and what must agree
// across ranks (see ch05_flags.h). Harness, not a hole.
#include "ch05_flags.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "dpt/report.h"

namespace dpt::ch05 {

namespace {
// A bucket cap in MiB: finite (nan once rounded to INT64_MIN bytes), from 0 to
// a million MiB (a TiB of gradients, more than any model here).
constexpr double kMaxBucketMb = 1e6;
// Samples a rank draws per step, --batch × --accumulate: the bound --batch
// itself has (2^20). The step's sampler holds world × that many indices, so
// 10^8 micro-batches ran out of memory before any step.
constexpr int64_t kMaxSamplesPerRankStep = int64_t(1) << 20;

}  // namespace

CLI::Validator bucket_mebibytes() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        double mb = std::strtod(v.c_str(), &end);
        bool ok = !v.empty() && *end == '\0' && std::isfinite(mb) && mb >= 0 && mb <= kMaxBucketMb;
        return ok ? "" : "expects a finite number of MiB from 0 to 1000000, got '" + v + "'";
      },
      "MIB");
}

int64_t mib_to_bytes(double mb) { return int64_t(std::llround(mb * 1024 * 1024)); }

BucketPlan plan_of(const Ch05Flags& f) {
  return {mib_to_bytes(f.bucket_mb), mib_to_bytes(f.first_bucket_mb < 0 ? f.bucket_mb : f.first_bucket_mb),
          f.overlap, f.accumulate, f.find_unused};
}

void add_ch05_flags(CLI::App& app, Ch05Flags& flags, const Options& options) {
  app.add_option("--bucket-mb", flags.bucket_mb, "Bucket cap in MiB (0: one all-reduce per parameter)")
      ->check(bucket_mebibytes())
      ->capture_default_str();
  app.add_option("--first-bucket-mb", flags.first_bucket_mb, "Cap of bucket 0 in MiB (DDP: 1); default: --bucket-mb")
      ->check(bucket_mebibytes());
  app.add_flag("--overlap,!--no-overlap", flags.overlap, "Launch buckets during backward (or all after it)")
      ->capture_default_str();
  app.add_option("--accumulate", flags.accumulate,
                 "Micro-batches per step; gradients sync after the last (--batch x this: at most 2^20)")
      ->check(integer_in(1, uint64_t(kMaxSamplesPerRankStep)))
      ->capture_default_str();
  app.add_flag("--find-unused-parameters", flags.find_unused,
               "After forward, mark parameters the loss does not reach ready (zero gradient), as DDP does");
  app.add_flag("--sweep-buckets", flags.sweep, "Time a few bucket sizes and name the best");
  app.add_option("--sweep-steps", flags.sweep_steps, "Steps per size in the sweep")
      ->check(positive_integer())
      ->capture_default_str();
  app.final_callback([&flags, &options] {  // once --batch is known too: a bad value, exit 2
    if (double(options.batch) * double(flags.accumulate) > double(kMaxSamplesPerRankStep))
      throw CLI::ValidationError("--accumulate", std::to_string(flags.accumulate) + " micro-batches of --batch " +
                                                     std::to_string(options.batch) + " are more than the 2^20 = " +
                                                     std::to_string(kMaxSamplesPerRankStep) + " samples a rank can " +
                                                     "draw per step: lower --accumulate or --batch");
    // Each micro-batch would be normalized by its own statistics: no step is one device's on the step's samples.
    if (options.batchnorm != "none" && flags.accumulate > 1)
      throw CLI::ValidationError("--accumulate", std::to_string(flags.accumulate) + " micro-batches with --batchnorm " +
                                                     options.batchnorm + ": batch norm would normalize each " +
                                                     "micro-batch apart; use --accumulate 1 with --batchnorm");
  });
}

}  // namespace dpt::ch05
