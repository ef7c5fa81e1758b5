// parse_child.h — what dpt::parse_flags prints for a command line, seen from
// outside: parse_flags exits on a refusal, so a forked child registers the
// flags (`add_flags`), parses `args` and exits 0; the parent returns what the
// child wrote to stderr, "" when the flags were accepted.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "dpt/options.h"
#include "support/catch.h"

namespace dpt_test {

inline std::string parse_error_of(const std::function<void(CLI::App&)>& add_flags, std::vector<std::string> args) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    CLI::App app("prog");
    add_flags(app);
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    dpt::parse_flags(app, int(argv.size()), argv.data());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string err;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) err.append(buffer, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return err;
}

}  // namespace dpt_test
