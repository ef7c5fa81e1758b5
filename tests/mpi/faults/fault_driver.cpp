// fault_driver.cpp — a small MPI program for the fault tests (test_faults.py):
// every rank says its pid, then the ranks talk until --seconds have passed, so
// that the test can freeze (SIGSTOP) or kill (SIGKILL) one of them mid-run and
// time how the job ends.
//
//   mpirun -np 4 fault_driver --comm mpi --comm-timeout 3 --pattern ring
//
// Patterns: ring (sendrecv to the right neighbour, from the left one: the
// rank after a frozen one times out waiting for it), allreduce (the library
// collective: every rank waits on "some rank"), error (every rank fails at
// once: the error lines must not interleave).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dpt/check.h"
#include "dpt/comm.h"
#include "dpt/launch.h"
#include "dpt/options.h"

int main(int argc, char** argv) {
  dpt::LaunchOptions launch_options;
  std::string pattern = "ring";
  double seconds = 60;
  CLI::App app("fault_driver: ranks that talk until stopped", "fault_driver");
  dpt::add_launch_flags(app, launch_options);
  app.add_option("--pattern", pattern, "ring | allreduce | error")->check(CLI::IsMember({"ring", "allreduce", "error"}));
  app.add_option("--seconds", seconds, "How long the ranks talk");
  dpt::parse_flags(app, argc, argv);
  return dpt::run_guarded("fault_driver", [&] {
    dpt::launch(launch_options, [&](dpt::Context& ctx) {
      std::printf("rank %d pid %d\n", ctx.rank, int(::getpid()));
      std::fflush(stdout);
      if (pattern == "error") DPT_FAIL("rank " << ctx.rank << " fails on purpose, as every rank does at once");
      std::vector<float> out(1024, float(ctx.rank)), in(1024);
      auto start = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - start < std::chrono::duration<double>(seconds)) {
        if (pattern == "ring")
          ctx.comm.sendrecv(out.data(), 1024, (ctx.rank + 1) % ctx.world, in.data(), 1024,
                            (ctx.rank + ctx.world - 1) % ctx.world);
        else
          ctx.comm.all_reduce(out.data(), 1024, dpt::ReduceOp::Max);
        usleep(1000);
      }
    });
  });
}
