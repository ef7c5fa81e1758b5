// lecture.cpp — run_chapter: the harness around a chapter's lecture (lecture.h).
#include "dpt/lecture.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "dpt/check.h"
#include "dpt/data_parallel.h"

namespace dpt {

Lecture::Lecture(Context* ctx, Device& device, const Options& options, bool verify_steps, const std::string& program)
    : o(options),
      say((ctx == nullptr || ctx->is_root()) && !options.quiet),
      data(load_dataset(options)),
      summary(program.substr(0, 4) + " summary", {"what", "value"}),
      recorder((ctx == nullptr || ctx->is_root()) && verify_steps),
      verify(verify_steps),
      step_check_batch(options.batch * (ctx ? ctx->world : 1)),
      ctx_(ctx),
      device_(device) {
  if (is_root()) held_out_ = load_held_out(options, data);
}

Context& Lecture::ctx() {
  DPT_CHECK(ctx_ != nullptr, "a one-device chapter has no ranks: Lecture::ctx() is for run_chapter's lectures");
  return *ctx_;
}

const StepCheck& Lecture::step_check() {
  if (!step_check_) step_check_ = recorder.replay(o, data, step_check_batch);
  return *step_check_;
}

int Lecture::finish() {
  // Collective, before rank 0 goes on alone: batch norm's buffers across ranks.
  const bool norms_across_ranks = ctx_ != nullptr && kept_ && !kept_->norms().empty() && o.steps > 0;
  const double running_spread = norms_across_ranks ? running_statistics_spread(*ctx_, *kept_) : 0;
  if (!is_root()) return 0;
  if (kept_) save_outputs(o, *kept_, data);
  if (o.steps == 0) {
    say.say("--steps 0: wrote the requested outputs; no training, nothing to check.");
    return 0;
  }
  if (!kept_ && summary.empty() && verdicts.all().empty()) return 0;  // a run with nothing to judge (ch07 --consolidate)
  if (kept_) report_held_out(*kept_, data, held_out_, o.steps, o.metrics, summary);
  if (verify && !step_check().checked.empty()) {
    if (o.batchnorm == "local")  // per-rank statistics: a gap the lesson expects, reported
      add_local_batch_norm_report(verdicts, step_check());
    else
      add_step_check_verdicts(verdicts, step_check(), step_check_cause, step_check_judges_start);
  }
  if (norms_across_ranks) add_running_statistics_verdict(verdicts, o.batchnorm, running_spread);
  if (!summary.empty()) summary.print(std::cout);
  verdicts.print(std::cout);
  return verdicts.exit_code();
}

void add_running_statistics_verdict(Verdicts& v, const std::string& batchnorm, double spread) {
  const std::string what = "batch norm's running mean and var, every rank's vs rank 0's: max |difference|";
  if (batchnorm == "sync")
    v.at_most(what, spread, 0,
              "each rank updates them from the same global moments, from rank 0's start (a loaded file's included)");
  else
    v.report(what, spread, "expected with --batchnorm local: each rank averages its own shard's moments (rank 0's are "
                           "the ones saved and scored)");
}

namespace {

// The chapter's own flags as (flag, value) pairs for check_ranks_agree: the
// text given on the command line, or "(default)" (a flag given on one rank
// and left at its default on another is refused, though it may mean the same).
std::vector<std::pair<std::string, std::string>> chapter_flag_values(const std::vector<CLI::Option*>& options,
                                                                      const std::vector<std::string>& rank_local) {
  std::vector<std::pair<std::string, std::string>> values;
  for (CLI::Option* option : options) {
    const std::string name = option->get_name();
    if (is_output(option) || std::find(rank_local.begin(), rank_local.end(), name) != rank_local.end()) continue;
    std::string value;
    for (const std::string& result : option->results()) value += (value.empty() ? "" : " ") + result;
    if (option->count() == 0) value = option->get_default_str().empty() ? "(default)" : option->get_default_str();
    values.emplace_back(name, value);
  }
  return values;
}

// The options `add_flags` registered: those not on `app` before it ran.
std::vector<CLI::Option*> added_options(CLI::App& app, Options& options, const ChapterFlags& add_flags) {
  std::vector<CLI::Option*> before = app.get_options();
  if (add_flags) add_flags(app, options);
  std::vector<CLI::Option*> added;
  for (CLI::Option* option : app.get_options())
    if (std::find(before.begin(), before.end(), option) == before.end()) added.push_back(option);
  return added;
}

}  // namespace

int run_chapter(int argc, char** argv, const Chapter& chapter, const ChapterFlags& add_flags,
                const std::function<void(Lecture&)>& lecture) {
  CLI::App app{chapter.program + " — " + chapter.title, chapter.program};
  Options options = chapter.defaults;
  LaunchOptions launch_options;
  launch_options.ranks = chapter.default_ranks;
  bool verify = true;
  add_common_flags(app, options);
  add_launch_flags(app, launch_options);
  add_data_parallel_flags(app, verify);
  std::vector<CLI::Option*> own = added_options(app, options, add_flags);
  if (chapter.batch_norm_flag) own.push_back(add_batch_norm_flag(app, options));  // agreed by every rank
  own.push_back(app.get_option("--verify"));  // a chapter may run a collective check under it (ch07)
  parse_flags(app, argc, argv);
  // The default rank count is for threads; under mpirun the process count decides.
  if (!launch_options.ranks_given && launch_options.comm != "threads") launch_options.ranks = 1;
  const auto own_values = chapter_flag_values(own, chapter.rank_local_flags);
  return run_lecture(chapter.program, launch_options, [&](Context& ctx) {
    Lecture lec(&ctx, ctx.device, options, verify, chapter.program);
    check_ranks_agree(ctx.comm, options, lec.data, own_values);
    lecture(lec);
    return lec.finish();
  });
}

int run_model_chapter(int argc, char** argv, const Chapter& chapter, const ChapterFlags& add_flags,
                      const bool& quiet, const std::function<void(ModelChapterRun&)>& body) {
  CLI::App app{chapter.program + " — " + chapter.title, chapter.program};
  Options unused = chapter.defaults;  // the common flags are not this chapter's
  LaunchOptions launch_options;
  launch_options.ranks = chapter.default_ranks;
  bool verify = true;
  add_launch_flags(app, launch_options);
  add_data_parallel_flags(app, verify);
  std::vector<CLI::Option*> own = added_options(app, unused, add_flags);
  own.push_back(app.get_option("--verify"));
  parse_flags(app, argc, argv);
  const bool one_rank = launch_options.comm != "threads" || (chapter.one_rank_run && chapter.one_rank_run());
  if (!launch_options.ranks_given && one_rank) launch_options.ranks = 1;
  const auto own_values = chapter_flag_values(own, chapter.rank_local_flags);
  return run_lecture(chapter.program, launch_options, [&](Context& ctx) {
    check_ranks_agree(ctx.comm, unused, Dataset{}, own_values);
    ModelChapterRun run{ctx, Narrator(ctx.is_root() && !quiet), Table(chapter.program.substr(0, 4) + " summary", {"what", "value"}),
                        Verdicts{}, verify};
    body(run);
    if (!ctx.is_root()) return 0;
    if (!run.summary.empty()) run.summary.print(std::cout);
    run.verdicts.print(std::cout);
    return run.verdicts.exit_code();
  });
}

int run_one_device_chapter(int argc, char** argv, const Chapter& chapter,
                           const ChapterFlags& add_flags,
                           const std::function<void(Lecture&)>& lecture) {
  CLI::App app{chapter.program + " — " + chapter.title, chapter.program};
  Options options = chapter.defaults;
  std::string device = "cpu";
  add_common_flags(app, options);
  add_device_flag(app, device);
  if (chapter.batch_norm_flag) add_batch_norm_flag(app, options);
  added_options(app, options, add_flags);
  parse_flags(app, argc, argv);
  int verdict = 0;
  int error = run_guarded(chapter.program, [&] {
    Lecture lec(nullptr, single_device(device), options, false, chapter.program);
    lecture(lec);
    verdict = lec.finish();
  });
  return error != 0 ? error : verdict;
}

}  // namespace dpt
