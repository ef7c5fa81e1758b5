// mpi_child.h — runs one hidden test case of this test program in every
// process of a real mpirun: how the GPU tests start NCCL ranks.
//
//   child test case:  TEST_CASE("child: ...", "[.]"), inert unless
//                     DPT_TEST_CHILD names it; it prints one line per rank
//                     the parent reads (and its errors: child_says.h);
//   parent test:      run_child_case("child: ...", "nccl", 2, "")
#pragma once

#include <unistd.h>

#include <climits>
#include <string>

#include "support/child_says.h"
#include "support/run_program.h"

namespace dpt_test {

/// This test program's own path (from /proc/self/exe).
inline std::string self_path() {
  char path[PATH_MAX] = {};
  ssize_t got = readlink("/proc/self/exe", path, sizeof path - 1);
  return got > 0 ? std::string(path, std::size_t(got)) : "dpt_gpu_tests";
}

/// `mpirun -np np` on this program's test case `test_case`, with
/// DPT_TEST_CHILD=`child` and `env` (VAR=value ...) exported to the ranks,
/// under `timeout 300` so a hang fails instead of blocking; Catch2's colour
/// off (mpirun gives the ranks a terminal).
inline ProgramResult run_child_case(const std::string& test_case, const std::string& child, int np,
                                    const std::string& env) {
  std::string exports = " -x DPT_TEST_CHILD";
  for (std::size_t at = 0; at < env.size();) {  // -x each VAR of env
    std::size_t eq = env.find('=', at), space = env.find(' ', at);
    exports += " -x " + env.substr(at, eq - at);
    at = space == std::string::npos ? env.size() : space + 1;
  }
  std::string command = "DPT_TEST_CHILD=" + child + " " + env + " timeout 300 " + launcher() + " -np " +
                        std::to_string(np) + exports + " " + self_path() + " '" + test_case + "' " + kCatchNoColour;
  return run_command(command);
}

}  // namespace dpt_test
