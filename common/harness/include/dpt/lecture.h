/// @file lecture.h
/// @brief The course's harness around a chapter's lecture, in one call:
/// `run_chapter` (ranks) or `run_one_device_chapter` (chapters 01, 02).
///
/// What it does, so the lecture holds only the lesson:
/// - before: the common flags (options.h), the launch flags (launch.h) and
///   `--verify`, plus the chapter's own (`add_flags`); parsing; on every rank
///   the data set, the held-out set (rank 0), and the check that every rank
///   was started with the same flags, the chapter's own included (rank
///   agreement, options.h);
/// - after, on rank 0: `--save-weights`/`--save-data` of the model the lecture
///   kept, its held-out accuracy as a summary row, the step check (replay of
///   the recorded steps on one device, step_check.h) as a verdict, then the
///   summary table and the verdicts; the exit code (0 all ✔, 3 one ✘, 1 error).
///
///     void lecture(dpt::Lecture& lec) {          // every rank
///       dpt::MLP replica = dpt::make_replica(lec.ctx(), lec.o);
///       lec.keep(replica);                       // saved and scored at the end
///       if (lec.o.steps == 0) return;
///       ... train, lec.summary.add_row(...), lec.verdicts.at_most(...) ...
///     }
///     int main(int argc, char** argv) {
///       return dpt::run_chapter(argc, argv, {"ch04_ring_allreduce", "ring all-reduce"},
///                               [&](CLI::App& app, dpt::Options&) { /* chapter flags */ }, lecture);
///     }
///
/// Left out: chapters that are not a training run (their lecture still gets
/// data and flags; it simply keeps no model).
#pragma once

#include "dpt/cli_fwd.h"
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/evaluate.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/step_check.h"
#include "dpt/verdict.h"

namespace dpt {

/// A chapter program's name and one-line title (`--help`'s first line).
struct Chapter {
  std::string program;  ///< "ch04_ring_allreduce": the binary, and the prefix of its error lines
  std::string title;    ///< "ring all-reduce: scatter-reduce + all-gather"
  /// Chapter flags each rank may set for itself: left out of the rank
  /// agreement, as every output flag (add_output) is. Every other chapter flag
  /// must be given alike.
  std::vector<std::string> rank_local_flags = {};
  /// The common flags' defaults for this chapter (ch05: a larger --model).
  Options defaults = {};
  /// --ranks when the command line gives none (threads): the ranks of the page's
  /// first command, so that a bare run's distributed verdicts can fail. Under
  /// mpirun the process count decides, as always.
  int default_ranks = 1;
  /// Whether the chapter takes --batchnorm none|local|sync (its model can
  /// carry batch norm; options.h's add_batch_norm_flag). Off: no such flag.
  bool batch_norm_flag = false;
  /// Read after parsing (run_model_chapter): true when the flags ask for a
  /// run on one device (ch14's --batch-sweep); --ranks then defaults to 1.
  std::function<bool()> one_rank_run = {};
};

/// Registers a chapter's own flags on `app`; `options` (the common flags,
/// parsed into after) is there for checks that join both.
using ChapterFlags = std::function<void(CLI::App& app, Options& options)>;

/// What a lecture gets on every rank. Rank 0's `summary` and `verdicts` are
/// printed after the lecture returns; other ranks' are ignored.
class Lecture {
 public:
  const Options& o;        ///< the common flags
  Narrator say;            ///< prints on rank 0 unless --quiet
  Dataset data;            ///< the training set, the same on every rank (checked)
  Table summary;           ///< "chNN summary": rows the lecture adds, then the held-out rows
  Verdicts verdicts;       ///< judged on rank 0
  StepRecorder recorder;   ///< records on rank 0 under --verify (the default)
  const bool verify;       ///< --verify: compare chosen steps with one device at the end
  /// Samples per step of the one-device replay (default --batch × ranks).
  int64_t step_check_batch;
  /// What the step check's ✘ blames (default: the ranks' averaging;
  /// dpt/step_check.h): the parts this chapter combines into the gradient.
  std::string step_check_cause = kStepCheckCause;
  /// Whether the step check also judges the weights before step 0 against
  /// the flags' model ("the replica started from the master copy"); false
  /// where the chapter has no master copy and judges its start itself.
  bool step_check_judges_start = true;

  /// This rank; only in a distributed chapter (run_chapter).
  Context& ctx();
  /// The device this rank computes on.
  Device& device() { return device_; }
  /// Rank 0 (a one-device chapter's only rank) prints and reports.
  bool is_root() const { return ctx_ == nullptr || ctx_->is_root(); }

  /// The model the harness saves (--save-weights) and scores on the held-out
  /// set after the lecture. It keeps a handle that shares the model's tensors,
  /// so keep the replica before training: what training writes is what is saved.
  void keep(const MLP& model) { kept_ = model; }
  /// Replays the recorded steps on one device (rank 0; once) and returns the
  /// check; its verdict is added at the end whether or not this is called.
  const StepCheck& step_check();
  /// The held-out set (rank 0; empty elsewhere and with --eval-samples 0).
  const HeldOut& held_out() const { return held_out_; }

  /// Loads the data (and on rank 0 the held-out set); `ctx` null for one device.
  Lecture(Context* ctx, Device& device, const Options& o, bool verify, const std::string& program);
  /// The end of the run on rank 0, as the file comment says; returns the exit code.
  int finish();

 private:
  Context* ctx_;
  Device& device_;
  HeldOut held_out_;
  std::optional<MLP> kept_;
  std::optional<StepCheck> step_check_;
};

/// The verdict on batch norm's running statistics across ranks (`spread`:
/// running_statistics_spread): equal with --batchnorm sync, a reported
/// number with local (each rank's own moments).
void add_running_statistics_verdict(Verdicts& v, const std::string& batchnorm, double spread);

/// A distributed chapter's main(): flags, launch, the lecture on every rank,
/// the end on rank 0; returns the exit code. `add_flags` registers the
/// chapter's own flags (their variables must outlive the call).
int run_chapter(int argc, char** argv, const Chapter& chapter, const ChapterFlags& add_flags,
                const std::function<void(Lecture&)>& lecture);

/// The same for a one-device chapter: `--device cpu|cuda` instead of the
/// launch flags, no --verify, the lecture on this thread.
int run_one_device_chapter(int argc, char** argv, const Chapter& chapter,
                           const ChapterFlags& add_flags,
                           const std::function<void(Lecture&)>& lecture);

/// What a chapter that brings its own model and data (chapter 14 on: a
/// language model, not the MLP on images) gets on every rank. Rank 0's
/// `summary` and `verdicts` are printed when the body returns.
struct ModelChapterRun {
  Context& ctx;            ///< this rank
  Narrator say;            ///< prints on rank 0 unless the chapter's --quiet
  Table summary;           ///< "chNN summary": rows the body adds
  Verdicts verdicts;       ///< judged on rank 0
  const bool verify;       ///< --verify (on by default): check steps against one device
};

/// main() of such a chapter: the launch flags, `--verify` and the chapter's
/// own flags (`add_flags`; its Options argument is unused: none of the common
/// flags is registered, the chapter names its own), parsing, a check that every
/// rank was started with the same chapter flags (outputs and
/// `rank_local_flags` apart), the body on every rank, then rank 0's summary and
/// verdicts; the exit code as run_chapter's (0 ✔, 3 a ✘, 1 an error, 2 a bad
/// flag). `quiet` is read after parsing: the chapter's own --quiet, if any.
int run_model_chapter(int argc, char** argv, const Chapter& chapter, const ChapterFlags& add_flags,
                      const bool& quiet, const std::function<void(ModelChapterRun&)>& body);

}  // namespace dpt
