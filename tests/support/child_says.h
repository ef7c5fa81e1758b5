// child_says.h — a test that starts a child process reads the child's own
// sentences, on lines of their own; never a Catch2 report of them.
//
// Catch2 wraps its report at 80 columns, breaking after spaces, ':' and '.'
// alike, so where a sentence breaks moves with whatever it quotes (a host
// name, a path); under mpirun the ranks write to a pseudo-terminal, so
// Catch2 3 also colours the report and every line ends in "\r\n". So:
//
//   child test case:  dpt_test::say_failure("nccl child failed: ", [&] { ... });
//                     prints what the body throws as one line, after the
//                     prefix, then rethrows (the child still fails);
//   parent test:      runs the child with kCatchNoColour and reads
//                     said_after(output, "nccl child failed: ").
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace dpt_test {

/// Catch2 flags that switch the report's colour off (2 and 3 spell it apart).
#if DPT_CATCH2_MAJOR >= 3
inline const char* const kCatchNoColour = "--colour-mode none";
#else
inline const char* const kCatchNoColour = "--use-colour no";
#endif

/// Runs `body`; if it throws, prints `prefix` and the exception's message as
/// one line on stdout (newlines in the message become spaces), then rethrows.
template <class Body>
void say_failure(const std::string& prefix, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    std::string line = prefix + e.what();
    for (char& c : line)
      if (c == '\n' || c == '\r') c = ' ';
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    throw;
  }
}

/// What follows `prefix` on each line of `output` that holds it, up to the
/// line's end (a pseudo-terminal's '\r' dropped): one entry per such line.
inline std::vector<std::string> said_after(const std::string& output, const std::string& prefix) {
  std::vector<std::string> said;
  for (std::size_t at = 0; at < output.size();) {
    std::size_t end = output.find('\n', at);
    if (end == std::string::npos) end = output.size();
    std::string line = output.substr(at, end - at);
    at = end + 1;
    while (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t found = line.find(prefix);
    if (found != std::string::npos) said.push_back(line.substr(found + prefix.size()));
  }
  return said;
}

}  // namespace dpt_test
