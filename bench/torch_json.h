// torch_json.h — how a CPU bench runs its PyTorch twin (bench/torch_*_step.py):
// a shell command whose standard output is one JSON object.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

namespace dpt_bench {

/// Runs `command` (stderr discarded) and parses what it printed; {"error": why}
/// when it could not start or printed no JSON object.
inline nlohmann::json run_json_command(const std::string& command) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return {{"error", "could not start: " + command}};
  std::string out;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  nlohmann::json parsed = nlohmann::json::parse(out, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object())
    return {{"error", command + " exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) +
                          " and printed no JSON"}};
  return parsed;
}

}  // namespace dpt_bench
