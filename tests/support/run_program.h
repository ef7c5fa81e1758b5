// run_program.h — runs a chapter binary from a test and reads what it wrote.
#pragma once

#include <unistd.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dpt_test {

/// Exit code and combined stdout+stderr of a command.
struct ProgramResult {
  int exit_code = -1;
  std::string output;
};

/// Path of a built program: $DPT_BIN_DIR/name (CTest sets DPT_BIN_DIR).
inline std::string program_path(const std::string& name) {
  const char* dir = std::getenv("DPT_BIN_DIR");
  return std::string(dir ? dir : "bin") + "/" + name;
}

/// Runs a shell command and captures its exit code and output.
inline ProgramResult run_command(const std::string& command) {
  ProgramResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  while (std::fgets(buffer.data(), int(buffer.size()), pipe)) result.output += buffer.data();
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // The shell reports a program killed by a signal as 128 + the signal: say
  // so in words, so a test's summary line names a crash, not the last verdict.
  const int died_on = WIFSIGNALED(status) ? WTERMSIG(status)
                      : result.exit_code > 128 && result.exit_code < 160 ? result.exit_code - 128 : 0;
  if (died_on > 0)
    result.output += "\nthe program exited on signal " + std::to_string(died_on) + (died_on == 11 ? " (SIGSEGV)" : "") +
                     ": a crash, not a verdict. An offset out of its tensor is unchecked in the reference build; the "
                     "student build (cmake --preset student) names the call and the argument\n";
  return result;
}

/// Runs `program args` (program from program_path) and captures its output.
inline ProgramResult run_program(const std::string& name, const std::string& args) {
  return run_command(program_path(name) + " " + args);
}

#ifndef DPT_MPIEXEC
#define DPT_MPIEXEC "mpirun"
#endif

/// The launcher CMake found, allowed as root and oversubscribing the 2-core
/// machines: "mpirun --allow-run-as-root --oversubscribe".
inline std::string launcher() {
  std::string mpiexec = DPT_MPIEXEC;
  return (mpiexec.empty() ? std::string("mpirun") : mpiexec) + " --allow-run-as-root --oversubscribe";
}

/// Runs `name args` under `mpirun -np np`.
inline ProgramResult run_mpi(const std::string& name, int np, const std::string& args) {
  return run_command(launcher() + " -np " + std::to_string(np) + " " + program_path(name) + " " + args);
}

/// Runs an MPMD job of two processes: command line `rank0` as rank 0 and
/// `rank1` as rank 1 (`mpirun -np 1 rank0 : -np 1 rank1`).
inline ProgramResult run_mpmd(const std::string& rank0, const std::string& rank1) {
  return run_command(launcher() + " -np 1 " + rank0 + " : -np 1 " + rank1);
}

/// "" where this machine's mpirun starts MPMD jobs (`-np 1 a : -np 1 b`), else
/// why not: Debian 13's Open MPI 5.0.7 mpirun segfaults on any MPMD line, even
/// `true : true` (Open MPI 4 on Debian 12 and Ubuntu 24.04 runs it). That is
/// the machine's mpirun, not dpt: an MPMD test skips with this reason.
inline std::string mpmd_problem() {
  ProgramResult probe = run_mpmd("true", "true");
  if (probe.exit_code == 0) return "";
  return "this mpirun cannot start an MPMD job (`mpirun -np 1 true : -np 1 true` exits " +
         std::to_string(probe.exit_code) + "): " + probe.output;
}

/// One line that says why a program failed, for a test's message (no log
/// floods): the first line with "<program>: error:" (how chapters report
/// errors and timeouts), a failed verdict (✘) or a signal, else the last non-empty line
/// — and when that line is a pass ("all 4 checks passed", a ✔), a sentence
/// saying the program found nothing wrong, so a passing line is never quoted
/// as a failure's reason; at most 400 characters.
inline std::string summary_line(const std::string& output) {
  // A hole not written yet is the one line a student needs (and what the
  // grader counts as "not implemented"), even where the chapter went on.
  std::size_t hole = output.find("not implemented:");
  if (hole != std::string::npos) {
    std::size_t end = output.find_first_of(")\n", hole);
    return output.substr(hole, (end == std::string::npos ? output.size() : end) - hole).substr(0, 400);
  }
  std::string last, line;
  for (std::size_t at = 0; at <= output.size();) {
    std::size_t end = output.find('\n', at);
    if (end == std::string::npos) end = output.size();
    line = output.substr(at, end - at);
    at = end + 1;
    // "<program>: error: …" (not a verdict's "max relative error: 0": a ✔ line is never the reason)
    bool error = line.find(": error: ") != std::string::npos || line.find("internal error: ") != std::string::npos;
    if (line.find("\u2714") == std::string::npos &&
        (error || line.find("\u2718") != std::string::npos || line.find("exited on signal") != std::string::npos))
      return line.substr(0, 400);
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  if (last.find("checks passed") != std::string::npos || last.find("\u2714") != std::string::npos ||
      last.find("could not fail") != std::string::npos)
    return ("the program's own checks found nothing wrong (it ends \"" + last.substr(last.find_first_not_of(' ')) +
            "\"): what failed is this test's check, below")
        .substr(0, 400);
  return last.substr(0, 400);
}

/// Reads a JSONL file into one json object per line.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

/// How many lines `text` holds (its newlines).
inline int lines_in(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

/// A fresh path under the system temp dir, unique per test process.
inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/dpt_test_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace dpt_test
