// rehearsal.cpp — your run_schedule rehearsed before the chapter trusts its
// ranks to it (sections.h).
//
// A send order that deadlocks would stop the chapter at its first pipeline
// step, after the whole --comm-timeout, with no verdict. So rank 0 first runs
// each schedule on a private world of P rank threads: stand-in stages whose
// work is a fill, tensors of the real micro-batch's shape, sends above the
// run's eager limit waiting for their receive as they will in the run, and
// every wait bounded by a few seconds. A deadlock ends there as a ✘ naming
// the ranks that waited, and the chapter goes on without that schedule.
#include <algorithm>
#include <exception>

#include "dpt/launch.h"
#include "sections.h"

namespace dpt::ch13 {

namespace {
// The stand-ins fill tensors of a few KiB: the whole rehearsal needs
// milliseconds, so a wait of 3 s is a deadlock, not a slow peer. The other
// ranks wait for rank 0's rehearsals in one broadcast, bounded by
// --comm-timeout: the rehearsals together take at most half of it, so a
// deadlock is reported as your run_schedule's, not as that broadcast's.
constexpr double kRehearsalTimeoutS = 3;
double rehearsal_timeout_s(const Communicator& world, std::size_t schedules) {
  return std::min(kRehearsalTimeoutS, world.timeout_s() / 2 / double(std::max<std::size_t>(schedules, 1)));
}

// Stage s of P: takes and hands on micro_size x width tensors across its
// boundaries (width boundary_floats[s] between stages s and s+1), computes nothing.
StageWork stand_in(int s, int P, int64_t micro_size, const std::vector<int64_t>& boundary_floats) {
  const int64_t in = s > 0 ? boundary_floats[std::size_t(s - 1)] : 1, out = s + 1 < P ? boundary_floats[std::size_t(s)] : 1;
  StageWork work;
  work.input_buffer = [=](int) { return Tensor::zeros({micro_size, in}, Device::host()); };
  work.output_grad_buffer = [=](int) { return Tensor::zeros({micro_size, out}, Device::host()); };
  work.forward = [=](int, const Tensor&) { return s + 1 < P ? Tensor::zeros({micro_size, out}, Device::host()) : Tensor(); };
  work.backward = [=](int, const Tensor&) { return s > 0 ? Tensor::zeros({micro_size, in}, Device::host()) : Tensor(); };
  return work;
}

// "" when run_schedule ran `schedule` to the end on every stand-in stage, else why not.
std::string rehearse(const std::string& schedule, int P, int M, int64_t micro_size,
                     const std::vector<int64_t>& boundary_floats, int64_t eager_limit_bytes, double timeout_s) {
  LaunchOptions options;
  options.ranks = P;
  options.timeout_s = timeout_s;
  options.eager_limit_bytes = eager_limit_bytes;
  options.private_world = true;  // also from rank 0 of an mpirun job
  try {
    launch(options, [&](Context& ctx) {
      run_schedule(ctx.comm, schedule_of(schedule, ctx.rank, P, M), stand_in(ctx.rank, P, micro_size, boundary_floats));
    });
  } catch (const std::exception& e) {
    std::string why = e.what();
    const std::string advice = " (raise --comm-timeout if a peer is only slow)";  // not this wait's: it ignores the flag
    if (why.find(advice) != std::string::npos) why.erase(why.find(advice), advice.size());
    return why;
  }
  return "";
}
}  // namespace

std::vector<std::string> schedules_that_run(Communicator& world, const std::vector<std::string>& schedules, int stages,
                                            int micro_batches, int64_t micro_size,
                                            const std::vector<int64_t>& boundary_floats, int64_t eager_limit_bytes,
                                            const Narrator& say, Verdicts& v) {
  std::vector<float> runs(schedules.size(), 1.0f);
  const double timeout_s = rehearsal_timeout_s(world, schedules.size());
  if (world.rank() == 0)
    for (std::size_t k = 0; k < schedules.size(); ++k) {
      const std::string problem = rehearse(schedules[k], stages, micro_batches, micro_size, boundary_floats, eager_limit_bytes,
                                              timeout_s);
      runs[k] = problem.empty() ? 1.0f : 0.0f;
      v.holds(str(schedules[k], ": run_schedule runs every stage's schedule to the end (rehearsed on ", stages,
                  " rank threads, ", eager_limit_bytes == 0 ? std::string("every send") : str("sends above ", eager_limit_bytes, " bytes"),
                  " waiting for the receive)"),
              problem.empty(),
              problem.empty() ? "" : str("every wait was bounded by ", fmt(timeout_s), " s: ", problem));
      if (!problem.empty())
        say.say(str(schedules[k], ": your run_schedule did not finish its rehearsal (see its verdict), so ", schedules[k],
                    " is left out below"));
    }
  world.broadcast(runs.data(), int64_t(runs.size()), 0);  // every rank leaves out what rank 0 found stuck
  std::vector<std::string> kept;
  for (std::size_t k = 0; k < schedules.size(); ++k)
    if (runs[k] != 0) kept.push_back(schedules[k]);
  return kept;
}

}  // namespace dpt::ch13
