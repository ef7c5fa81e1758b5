// ch09_parameter_server — push, pull, and staleness.
//
// What it teaches: the design all-reduce replaced. S server ranks hold the
// parameters in S shards and run the optimizer; W worker ranks compute
// gradients, push each shard's slice to its server and pull the parameters
// back. Synchronous, it is gradient averaging again — one device's step on
// the workers' batches together — but every byte goes through the servers:
// W·Ψ/S in and out of each per step, where a ring moves ~2Ψ per rank whatever
// N is. Asynchronous, a server applies each push as it arrives, nobody waits
// for a straggler, and gradients are computed on parameters that are already
// stale; stale-synchronous (ssp) bounds how stale.
//
// The chapter checks that every server gets its own slice (on two servers
// or more, whatever --servers says), sync against one device step by step
// and where each round closed, counts the bytes through each server against
// W·Ψ/S (and the link model's time against the ring's), measures every
// push's staleness against what the arrival order implies and what it costs
// in held-out accuracy, judges ssp's bound, and with a straggler
// (--slow-rank) compares sync, async and ssp at equal time.
//
// What it leaves out: momentum and Adam on the servers (plain SGD only),
// pushes in a truly random order (the communicator has no receive from any
// source: servers serve an arrival order simulated from the workers' step
// times, sync ties drawn from --seed; arrival_order in ch09.h), fault
// tolerance and server replication.
//
// Run it (bare, it runs 5 ranks: 1 server, 4 workers):
//     build/reference/bin/ch09_parameter_server
//     build/reference/bin/ch09_parameter_server --ranks 5 --servers 1 --mode async --slow-rank 2
//     build/reference/bin/ch09_parameter_server --ranks 6 --servers 2 --mode ssp --max-staleness 2 --slow-rank 5
//     mpirun --oversubscribe -np 5 build/reference/bin/ch09_parameter_server --comm mpi --servers 1
//
// Your holes (chapters/09_parameter_server/ch09.h): apply_push, push_and_pull,
// ssp_must_wait. Exit code: 0 all verdicts ✔, 3 one ✘, 1 error.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "ch09.h"
#include "dpt/data_parallel.h"
#include "dpt/holes.h"
#include "dpt/lecture.h"
#include "parameter_server.h"
#include "ps_report.h"
#include "slice_check.h"
#include "staleness_plot.h"

using namespace dpt;
using namespace dpt::ch09;

struct Ch09Flags {
  int servers = 1;
  std::string mode = "async";
  int max_staleness = 2;
  int slow_rank = -1;
  double slowdown = 4;
  std::string plot;  // --plot FILE.svg: section 4's staleness histogram
};

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates. Flags, data, the held-out
// score and printing the summary and verdicts are the harness's (lecture.h).

void lecture(Lecture& lec, const Ch09Flags& f) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  const Dataset& data = lec.data;
  const HeldOut& held_out = lec.held_out();
  Verdicts& verdicts = lec.verdicts;
  Table& summary = lec.summary;
  const int S = f.servers, W = ctx.world - S;
  DPT_CHECK(W >= 1, "--servers " << S << " leaves no worker among " << ctx.world << " ranks: use --ranks "
                                 << S + 1 << " or more");
  DPT_CHECK(f.slow_rank < 0 || (f.slow_rank >= S && f.slow_rank < ctx.world),
            "--slow-rank " << f.slow_rank << " is not a worker: workers are ranks " << S << " to " << ctx.world - 1);
  const Mode mode = parse_mode(f.mode);
  const int slow = f.slow_rank < 0 ? -1 : f.slow_rank - S;
  std::vector<double> step_time(std::size_t(W), 1.0);  // in units of a normal worker's step
  if (slow >= 0) step_time[std::size_t(slow)] = f.slowdown;

  // ---- 1. Who is who
  const Roles roles{S, W, build_model(o, Device::host()).num_parameters()};
  say.section(str("1. Who is who: ", S, " server(s), ", W, " worker(s), Psi = ", roles.count, " parameters"));
  say.say(roles_text(roles));
  // Every server must get its own slice: with one server, that slice is the
  // whole gradient at offset 0 and any offset looks right, so the check runs
  // push_and_pull once on at least 2 servers (slice_check.h).
  const int probe = slice_check_servers(S, ctx.world);
  const std::string slices = check_slices(ctx, roles.count, probe);
  const std::string what = "each server receives exactly its slice of a push, and each answer lands at its shard's place";
  if (ctx.is_root() && probe == 1 && slices.empty())  // one server's slice starts at 0: any offset looks right
    verdicts.cannot_fail(what, "with 2 ranks, where one server's slice starts at 0 (try --ranks 3 or more)");
  else if (ctx.is_root())  // a failure names the check's own servers, which this run may not have
    verdicts.holds(what, slices.empty(),
                   slices.empty() ? str("one push_and_pull per worker through ", probe, " server(s), every value "
                                        "naming its element")
                   : probe == S ? slices
                                : str("the check runs ", probe, " servers (ranks 0 … ", probe - 1, ") where this run "
                                      "has ", S, ", so that a slice's offset shows; in that layout: ", slices));
  say.say(str("the slice check: one push_and_pull per worker through ", probe, " server(s), each value naming its "
              "element: ", slices.empty() ? "every server got its slice, every answer its place" : "see the verdicts"));

  // ---- 2. Synchronous: one device's step, taken by the servers
  say.section(str("2. Synchronous: every step waits for all ", W, " workers; the step check"));
  PsConfig sync = ps_config(Mode::Sync, S, arrival_order(Mode::Sync, std::vector<double>(std::size_t(W), 1.0),
                                                         double(o.steps), 0, o.seed));  // rounds in any order
  StepRecorder recorder(lec.verify && ctx.rank == S);  // the first worker sees every step's weights
  PsRun synced = run_parameter_server(ctx, o, data, sync, &recorder);
  write_sync_metrics(ctx, o, synced, W);  // --metrics: the workers' mean loss per step
  StepCheck check = share_step_check(ctx, roles, recorder, lec.verify, o, data);  // ps_report.cpp: to rank 0
  if (ctx.is_root() && lec.verify) add_ps_step_check_verdicts(verdicts, check, W);
  if (ctx.is_root()) {
    bool closed_right = false;
    std::string closes = round_closes_text(synced.applied, sync.order, W, closed_right);
    const std::string what = "sync: each round closes on its W-th push, whatever the order (server 0's apply_push)";
    if (W == 1 && closed_right)  // a round of one push closes on it, whatever apply_push decides
      verdicts.cannot_fail(what, "with 1 worker (try --ranks 5)");
    else
      verdicts.holds(what, closed_right, closes);
  }
  say.say(str("the servers took ", synced.version, " steps on ", W, " x ", o.batch, " samples each in ",
              fixed(synced.seconds, 2), " s",
              lec.verify ? str("; one device replayed ", check.checked.size(), " of them (verdicts below)") : ""));

  // ---- 3. Bytes through each server
  say.section("3. Bytes through each server per step, against W*Psi/S and the ring's 2(N-1)/N*Psi per rank");
  if (ctx.is_root()) bytes_section(say, ctx, roles, synced, verdicts, summary);

  // ---- 4. Staleness: the same number of pushes, applied on arrival
  PsConfig chosen = ps_config(mode, S, arrival_order(mode, step_time, double(o.steps), f.max_staleness, o.seed), slow,
                              f.slowdown);
  say.section(str("4. ", mode_name(mode), mode == Mode::Ssp ? str(" (max staleness ", f.max_staleness, ")") : "",
                  ": ", chosen.order.size(), " pushes, each an update; staleness per push",
                  slow >= 0 ? str(", worker ", slow, " ", fmt(f.slowdown), "x slower") : ""));
  PsRun staled = run_parameter_server(ctx, o, data, chosen);
  if (ctx.is_root()) {
    std::vector<int64_t> implied = implied_staleness(mode, chosen.order);
    say.say(staleness_text(staled.staleness, implied));
    write_staleness_plot(f.plot, str(mode_name(mode), ": pushes per staleness, ", W, " workers"), staled.staleness,
                         implied);
    say.say(f.plot.empty() ? "(--plot FILE.svg draws this histogram)" : "plot: " + f.plot);
    verdicts.holds("every push's staleness = what the arrival order implies", staled.staleness == implied,
                   staleness_summary(staled.staleness) + " measured, " + staleness_summary(implied) + " implied");
    Options plain = o;  // plain SGD: as many updates of one worker's batch, never stale
    plain.steps = int64_t(chosen.order.size());
    double one = accuracy(train_single_device(plain, data, o.batch), data, held_out);
    double stale = accuracy(model_of(o, staled.params), data, held_out);
    say.say(str("held-out accuracy after ", chosen.order.size(), " updates of ", o.batch, " samples: ",
                fixed(100 * stale, 2), "% with this staleness, ", fixed(100 * one, 2),
                "% for plain SGD on one device (never stale)"));
    summary.add_row({std::string(mode_name(mode)) + ": staleness mean / max", staleness_summary(staled.staleness)});
    summary.add_row({str(mode_name(mode), " vs plain SGD, held-out acc. at ", chosen.order.size(), " updates"),
                     fixed(100 * stale, 2) + "% vs " + fixed(100 * one, 2) + "%"});
  }

  // ---- 5. A straggler: sync, async and ssp for the same time
  if (slow >= 0) {
    say.section(str("5. A straggler: worker ", slow, " takes ", fmt(f.slowdown), "x as long; sync, async and ssp (s = ",
                    f.max_staleness, ") for the same time"));
    std::vector<RaceLane> lanes;
    for (Mode m : {Mode::Sync, Mode::Async, Mode::Ssp}) {
      PsConfig c = ps_config(m, S, arrival_order(m, step_time, double(o.steps), f.max_staleness, o.seed), slow,
                             f.slowdown);
      PsRun run = run_parameter_server(ctx, o, data, c);
      if (!ctx.is_root()) continue;
      lanes.push_back({m, int64_t(c.order.size()), run.seconds,
                       arrival_makespan(m, step_time, double(o.steps), f.max_staleness),
                       accuracy(model_of(o, run.params), data, held_out), run.staleness, c.order});
    }
    if (ctx.is_root()) race_section(say, lanes, W, f.max_staleness, f.slowdown, verdicts, summary);
  } else if (ctx.is_root() && W >= 2) {  // no straggler ran: judge ssp's bound on the step-time clock alone
    const double X = f.slowdown > 1 ? f.slowdown : 4;
    std::vector<double> times(std::size_t(W), 1.0);
    times.back() = X;
    say.section(str("5. ssp's bound on the step-time clock: worker ", W - 1, " ", fmt(X), "x slower, s = ",
                    f.max_staleness, " (--slow-rank runs it, beside sync and async)"));
    std::vector<int> order;
    const std::string hole =
        unwritten_hole_here([&] { order = arrival_order(Mode::Ssp, times, double(o.steps), f.max_staleness); });
    if (hole.empty()) {
      say.say(str("the fastest worker finished up to ", largest_lead(order, W), " steps more than the slowest, in ",
                  order.size(), " pushes"));
      add_ssp_bound_verdict(verdicts, order, W, f.max_staleness, X, arrival_makespan(Mode::Ssp, times,
                            double(o.steps), f.max_staleness));
    } else {  // the other holes' verdicts still print
      say.say(hole);
      verdicts.holds("ssp: steps the fastest worker finished beyond the slowest = max staleness + 1", false,
                     "ssp_must_wait is not written yet (exercises/09_parameter_server/staleness.cpp)");
    }
  }

  // ---- 6. Summary (the harness adds the synchronous model's held-out rows, then prints)
  if (!ctx.is_root()) return;
  lec.keep(model_of(o, synced.params));
  summary.add_row({"servers x workers x batch per worker", str(S, " x ", W, " x ", o.batch)});
}

// ----------------------------------------------------------------------------
// flags, then the lecture on every rank

int main(int argc, char** argv) {
  Ch09Flags f;
  auto add_flags = [&f](CLI::App& app, Options&) {
    app.add_option("--servers", f.servers, "Server ranks (0 … S-1) holding the parameters in S shards")
        ->check(integer_in(1, kMaxRanks))->capture_default_str();
    app.add_option("--mode", f.mode, "Section 4's mode: sync, async (apply each push on arrival) or ssp")
        ->check(CLI::IsMember({"sync", "async", "ssp"}))->capture_default_str();
    app.add_option("--max-staleness", f.max_staleness, "ssp: how many steps a worker may run ahead of the slowest")
        ->check(integer_in(0, 1000000))->capture_default_str();
    app.add_option("--slow-rank", f.slow_rank, "A worker rank that is --slowdown times slower (adds section 5)")
        ->check(integer_in(0, kMaxRanks));
    app.add_option("--slowdown", f.slowdown, "How many times longer the slow rank's steps take")
        ->check(number_in(1, 1000))->capture_default_str();
    add_output(app, "--plot", f.plot, "Write section 4's staleness histogram as an SVG file here");
    limit_optimizers(app, {"sgd"}, "the servers run plain SGD");
  };
  Chapter chapter{"ch09_parameter_server", "push, pull, and staleness"};
  chapter.default_ranks = 5;  // the page's first command: 1 server (--servers' default), 4 workers
  chapter.rank_local_flags = {"--plot"};  // rank 0 writes it
  return run_chapter(argc, argv, chapter, add_flags,
                     [&f](Lecture& lec) { lecture(lec, f); });
}
