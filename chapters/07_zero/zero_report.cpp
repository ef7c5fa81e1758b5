// zero_report.cpp — the ZeRO formulas, the memory and traffic tables, and
// their verdicts.
#include "zero_report.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "dpt/floats.h"
#include "dpt/launch.h"
#include "dpt/report.h"
#include "dpt/timing.h"
#include "dpt/zero_formula.h"

namespace dpt::ch07 {

// The mean probe's world: not a power of two, where dividing first differs.
constexpr int kMeanProbeRanks = 3;

// fp32 Adam: 4 bytes of weight, 4 of gradient, 8 of m and v (dpt/zero_formula.h divides them by stage).
constexpr StateBytes kFp32Adam{4, 4, 8};

double formula_bytes(int stage, double psi, int n) { return zero_state_bytes(stage, kFp32Adam, psi, psi / n).total(); }

std::string formula_text(int stage) { return zero_formula_text(std::max(0, std::min(stage, 3)), kFp32Adam); }

double theory_bytes_per_step(int stage, double psi, int n) { return (stage == 3 ? 3 : 2) * psi * 4 * (n - 1) / n; }

double padded_state_bytes(int stage, const Partition& part) {
  return zero_state_bytes(stage, kFp32Adam, double(part.padded), double(part.shard)).total();
}

double comm_formula_bytes(int stage, bool prefetch, const std::vector<Range>& layers,
                          const std::vector<LayerBucket>& buckets) {
  if (stage <= 1) return 0;
  int64_t bucket = 0, first = 0, second = 0;  // the largest bucket; the two largest layers
  for (const LayerBucket& b : buckets) bucket = std::max(bucket, b.range.size());
  for (const Range& l : layers) {
    if (l.size() > first) second = first, first = l.size();
    else second = std::max(second, l.size());
  }
  if (stage == 2) return 4.0 * double(bucket);
  return 4.0 * double(bucket + first + (prefetch ? second : 0));
}

// What a stage-3 rank holds in comm buffers during the backward of the layer
// that needs most: the layer gathered and its bucket open (zero_layers.cpp
// writes the layer's gradient into the bucket while the layer is in use).
double backward_comm_bytes(const std::vector<Range>& layers, const std::vector<LayerBucket>& buckets) {
  int64_t most = 0;
  for (const LayerBucket& b : buckets)
    for (int l : b.layers) most = std::max(most, b.range.size() + layers[std::size_t(l)].size());
  return 4.0 * double(most);
}

void report_memory(Context& ctx, const ZeroRun& run, const Partition& part, int stage, bool prefetch, Verdicts& v,
                   bool print) {
  const MemorySnapshot& m = run.memory;
  auto at = [&](MemoryCategory c) { return m.at_peak[std::size_t(c)]; };
  const double formula = formula_bytes(stage, double(part.psi), part.world);
  const double padded = padded_state_bytes(stage, part), padding = padded - formula;
  const double comm = comm_formula_bytes(stage, prefetch, run.layers, run.buckets);
  const double states = at(MemoryCategory::Params) + at(MemoryCategory::Grads) + at(MemoryCategory::OptimizerState);
  const double expected = padded + at(MemoryCategory::Activations) + at(MemoryCategory::Other) + comm;
  const double states_off = max_over_ranks(ctx.comm, std::fabs(states - padded));
  const double comm_over = max_over_ranks(ctx.comm, m.peak[std::size_t(MemoryCategory::Comm)] - comm);
  const double held = stage == 3 ? backward_comm_bytes(run.layers, run.buckets) : 0;
  const double comm_under = max_over_ranks(ctx.comm, held - m.peak[std::size_t(MemoryCategory::Comm)]);
  const double above = max_over_ranks(ctx.comm, (m.peak_total - expected) / expected);
  if (!ctx.is_root()) return;
  if (print) {
    Table table("memory on rank 0's device by category (" + ctx.device.name() + ")",
                {"category", "now", "own peak", "at the total's peak"});
    for (int c = 1; c < kMemoryCategories; ++c)
      table.add_row({memory_category_name(MemoryCategory(c)), format_bytes(m.current[std::size_t(c)]),
                     format_bytes(m.peak[std::size_t(c)]), format_bytes(m.at_peak[std::size_t(c)])});
    table.add_row({"total", "", "", format_bytes(m.peak_total)});
    table.print(std::cout);
    Table formula_table("the ZeRO formula for stage " + std::to_string(stage) + ", plus what it leaves out",
                        {"term", "bytes"});
    formula_table.add_row({"model states " + formula_text(stage) + " (Ψ = " + std::to_string(part.psi) +
                               ", N = " + std::to_string(part.world) + ")",
                           format_bytes(formula)});
    formula_table.add_row({"+ padding to N·S = " + std::to_string(part.padded) + " floats", format_bytes(padding)});
    formula_table.add_row({"+ activations and backward temporaries (measured)", format_bytes(at(MemoryCategory::Activations))});
    formula_table.add_row({stage <= 1   ? std::string("+ comm buffers: none (a bucket is a view of the gradients)")
                           : stage == 2 ? std::string("+ comm buffers: the largest bucket")
                                        : std::string("+ comm buffers: the largest bucket and gathered layer") +
                                              (prefetch ? "s (two, prefetch)" : ""),
                           format_bytes(comm)});
    formula_table.add_row({"= expected peak", format_bytes(expected)});
    formula_table.add_row({"measured peak", format_bytes(m.peak_total)});
    formula_table.print(std::cout);
  }
  v.at_most("model states at the peak vs the formula on the padded buffer: |measured - formula| (bytes, worst rank)",
            states_off, 0, "a stage keeps exactly its formula's parameters, gradients and m, v");
  v.at_most("comm buffers' own peak minus their formula (bytes, worst rank)", comm_over, 0,
            "at most one open bucket, and at stage 3 one gathered layer (two with --prefetch): a bucket or a "
            "gathered layer kept after its use shows here");
  if (stage == 3)
    v.at_most("comm buffers' own peak below what one layer's backward holds, its bucket + the layer gathered (bytes, "
              "worst rank)", comm_under, 0,
              "a stage-3 layer is gathered into comm buffers (" + format_bytes(held) +
                  " at least): bytes charged to another category, or never allocated, show here");
  v.at_most("peak per rank above formula + named extras: (measured - expected) / expected (worst rank)", above, 0.05,
            "expected = model states + padding + activations + other + the comm buffers' formula");
}

void report_traffic(const ZeroRun& run, const Partition& part, int stage, Verdicts& v, bool print) {
  const int n = part.world;
  const double steps = double(std::max<std::size_t>(1, run.losses.size()));
  const double theory = theory_bytes_per_step(stage, double(part.psi), n);
  const double slack = 12.0 * double(part.padded - part.psi);  // ≤ 3 collectives × 4 bytes × the padding
  auto matrix = run.traffic.matrix();
  double worst = 0;
  bool ring = true;
  Table table("bytes sent per rank per step (traffic log) vs theory " + std::string(stage == 3 ? "3" : "2") +
                  "Ψ·4·(N-1)/N = " + format_bytes(theory),
              {"rank", "sent per step", "to its right neighbour"});
  for (int r = 0; r < n; ++r) {
    double sent = double(run.traffic.bytes_sent(r)) / steps;
    double right = double(matrix[std::size_t(r)][std::size_t((r + 1) % n)]) / steps;
    ring = ring && (n == 1 || sent == right);
    worst = std::max(worst, std::fabs(sent - theory));
    table.add_row({std::to_string(r), format_bytes(sent), format_bytes(right)});
  }
  if (print) table.print(std::cout);
  if (n == 1) {
    v.cannot_fail("every rank sends only to its right neighbour; bytes sent per rank per step", on_one_rank(4));
    return;
  }
  v.holds("every rank sends only to its right neighbour (ring)", ring, ring ? "" : run.traffic.to_string());
  v.at_most("bytes sent per rank per step: max |measured - theory| (bytes)", worst, slack,
            "theory counts Ψ, the ring moves N·S floats: at most 3 collectives × 4 bytes × " +
                std::to_string(part.padded - part.psi) + " padding floats");
}

nlohmann::json run_json(Context& ctx, const ZeroRun& run, const Partition& part, int stage, bool prefetch) {
  // Every rank's ledger, gathered: [peak_total, at_peak × categories, peak × categories] per rank.
  const int width = 1 + 2 * kMemoryCategories;
  std::vector<float> mine{float(run.memory.peak_total)}, all(std::size_t(width * ctx.world));
  for (double b : run.memory.at_peak) mine.push_back(float(b));
  for (double b : run.memory.peak) mine.push_back(float(b));
  ctx.comm.all_gather(mine.data(), all.data(), width);  // exact below 16 MiB; 7 digits above (a report)
  const double steps = double(std::max<std::size_t>(1, run.losses.size()));
  nlohmann::json out = {{"stage", stage}, {"world", part.world}, {"psi", part.psi}, {"padded", part.padded},
                        {"formula", formula_text(stage)},
                        {"formula_bytes", formula_bytes(stage, double(part.psi), part.world)},
                        {"padded_state_bytes", padded_state_bytes(stage, part)},
                        {"comm_formula_bytes", comm_formula_bytes(stage, prefetch, run.layers, run.buckets)},
                        {"theory_bytes_per_step", theory_bytes_per_step(stage, double(part.psi), part.world)},
                        {"median_step_s", median(run.step_seconds)}, {"ranks", nlohmann::json::array()}};
  for (int r = 0; r < ctx.world; ++r) {
    const float* row = all.data() + std::size_t(r * width);
    nlohmann::json at_peak, peak;
    for (int c = 0; c < kMemoryCategories; ++c) {
      at_peak[memory_category_name(MemoryCategory(c))] = row[1 + c];
      peak[memory_category_name(MemoryCategory(c))] = row[1 + kMemoryCategories + c];
    }
    out["ranks"].push_back({{"rank", r}, {"peak_total", row[0]}, {"at_peak", at_peak}, {"peak", peak},
                            {"sent_per_step", double(run.traffic.bytes_sent(r)) / steps}});
  }
  return out;
}

std::string which_stage_fits(const Partition& part, int stage, double capacity) {
  std::string text = "Model states per rank (Ψ = " + std::to_string(part.psi) + ", N = " + std::to_string(part.world) + "):";
  int first = -1;
  for (int s = 0; s <= 3; ++s) {
    double need = padded_state_bytes(s, part);
    text += " stage " + std::to_string(s) + " " + formula_text(s) + " = " + format_bytes(need) + ";";
    if (first < 0 && need < capacity) first = s;
  }
  if (first < 0) return text + " none fits " + format_bytes(capacity) + ": use more ranks or a smaller model";
  if (first > stage)
    return text + " they fit from stage " + std::to_string(first) + " on (activations and buffers come on top): run with --stage " + std::to_string(first) +
           (first < 3 ? " (or higher)" : "");
  return text + " this stage's fit, its activations and buffers do not: " +
         (stage < 3 ? "run with --stage 3, or " : std::string("try ")) +
         "a smaller --batch or --bucket-mb";
}

// ----------------------------------------------------------------------------
// the partition, probed

namespace {
// "" when `p` cuts `psi` parameters over `n` ranks as ch07.h says; else what breaks, in words.
std::string partition_problem(const Partition& p, int64_t psi, int n) {
  const std::string call = "partition_parameters(" + std::to_string(psi) + ", " + std::to_string(n) + ")";
  if (p.psi != psi || p.world != n)
    return call + " says Ψ = " + std::to_string(p.psi) + ", N = " + std::to_string(p.world);
  if (p.shard < 1 || p.padded != p.shard * n)
    return call + ": the buffer of " + std::to_string(p.padded) + " floats is not N = " + std::to_string(n) +
           " shards of S = " + std::to_string(p.shard);
  if (p.padded < psi)
    return call + ": N·S = " + std::to_string(p.padded) + " floats leave parameters without an owner";
  if ((p.shard - 1) * n >= psi)
    return call + ": pads " + std::to_string(p.padded - psi) + " floats (S = " + std::to_string(p.shard) +
           "), more than the least among the cuts into N equal shards that hold all " + std::to_string(psi) +
           " parameters";
  return "";
}
}  // namespace

void check_partition(const Partition& run, Verdicts& verdicts) {
  std::string problem = partition_problem(run, run.psi, run.world);
  for (int64_t psi = run.psi + 1; psi < run.psi + run.world && problem.empty(); ++psi)
    problem = partition_problem(partition_parameters(psi, run.world), psi, run.world);
  verdicts.holds("the partition: every parameter in exactly one of N equal shards, no equal cut padding less "
                 "(the run's Ψ and the next N-1 counts on N ranks)",
                 problem.empty(), problem.empty() ? str("N·S - Ψ = ", run.padded - run.psi, " with N = ", run.world) : problem);
}

// ----------------------------------------------------------------------------
// the mean, probed

void check_bucket_mean(Verdicts& verdicts) {
  std::string problem;
  LaunchOptions options;
  options.ranks = kMeanProbeRanks;
  options.timeout_s = 10;
  options.private_world = true;  // also from rank 0 of an mpirun job
  try {
    launch(options, [&](Context& ctx) {
      const int n = ctx.world, r = ctx.rank;
      auto value = [](int rank, int64_t x) { return float((x * 7 + rank * 13) % 29 - 14); };  // small integers
      for (int stage = 0; stage <= 3; ++stage) {
        ZeroState s{ctx.comm, ctx.device};
        s.stage = stage, s.part = partition_parameters(37, n);
        const int64_t S = s.part.shard, P = s.part.padded;
        std::vector<float> mine;
        for (int64_t x = 0; x < P; ++x) mine.push_back(value(r, x));
        s.grads = Tensor::zeros({stage <= 1 ? P : S}, ctx.device);
        Tensor bucket = stage <= 1 ? s.grads : Tensor::zeros({P}, ctx.device);
        copy_floats(bucket.data(), mine.data(), P);
        ctx.comm.barrier();
        ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
        ctx.comm.barrier();
        on_bucket_ready(s, {0, P}, bucket);
        ctx.comm.barrier();
        // What the stage needs: a reduce-scatter sends N-1 of the N chunks of S floats; stage 0 an all-gather more.
        const float sent = float(ctx.comm.traffic().bytes_sent(r)), needed = float((stage == 0 ? 2 : 1) * (n - 1) * S * 4);
        std::vector<float> held = s.grads.to_vector();  // this rank's part: at its flat place, or in its shard
        float off = 0;
        for (int64_t x = r * S; x < (r + 1) * S; ++x) {
          float sum = 0;
          for (int q = 0; q < n; ++q) sum += value(q, x);  // exact: small integers
          if (held[std::size_t(stage <= 1 ? x : x - r * S)] != sum / float(n)) ++off;
        }
        std::vector<float> report{off, sent, stage >= 2 && bucket.defined() ? 1.0f : 0.0f};
        std::vector<float> all(std::size_t(3 * n));
        ctx.comm.all_gather(report.data(), all.data(), 3);
        if (!ctx.is_root()) continue;
        for (int q = 0; q < n && problem.empty(); ++q) {
          const float* f = all.data() + 3 * q;
          const std::string at = "stage " + std::to_string(stage) + ", rank " + std::to_string(q) + ": ";
          if (f[0] > 0)
            problem = at + std::to_string(int(f[0])) + " floats of its part are not the sum ÷ N to the bit (the "
                      "mean is the sum divided once by N)";
          else if (f[1] != needed)
            problem = at + "sent " + std::to_string(int64_t(f[1])) + " bytes; its stage needs " +
                      std::to_string(int64_t(needed)) + " (" + (stage == 0 ? "every rank needs every mean" :
                      "a rank needs only its own part of the mean") + ")";
          else if (f[2] > 0)
            problem = at + "the bucket is still held after the call (stages 2-3 keep only the gradient shard)";
        }
      }
    });
  } catch (const std::exception& e) {  // a probe that deadlocks or throws is a failed check, said in its words
    problem = e.what();
  }
  verdicts.holds("a probe bucket through on_bucket_ready at stages 0-3 on " + std::to_string(kMeanProbeRanks) +
                     " ranks: each part the sum ÷ N to the bit, no more bytes sent than the stage needs",
                 problem.empty(),
                 problem.empty() ? "training cannot show a mean taken another way (every stage would take it alike), "
                                   "and a power of two hides dividing first: the probe runs 3 ranks, every stage"
                                 : problem);
}

}  // namespace dpt::ch07
