// check.cpp — formatting and throwing dpt::Error.
//
// A user reads the sentence; a developer can ask for the source location with
// DPT_DEBUG=1 (it is always in Error::where()).
#include "dpt/check.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dpt {

namespace {
thread_local int t_error_rank = -1;

std::string location(const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  return std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
}
}  // namespace

void set_error_rank(int rank) { t_error_rank = rank; }
int error_rank() { return t_error_rank; }

void print_error_line(const std::string& line) {
  std::string text = line + "\n";
  for (std::size_t at = 0; at < text.size();) {  // one write unless interrupted or partial
    ssize_t n = ::write(STDERR_FILENO, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: nowhere left to say it
    at += std::size_t(n);
  }
}

namespace detail {

bool debug_enabled() {
  const char* value = std::getenv("DPT_DEBUG");
  return value && *value && std::strcmp(value, "0") != 0;
}

std::string format_error(const char* file, int line, const std::string& message) {
  std::ostringstream out;
  if (t_error_rank >= 0) out << "[rank " << t_error_rank << "] ";
  if (debug_enabled()) out << location(file, line) << ": ";
  out << message;
  return out.str();
}

void throw_error(const char* file, int line, const std::string& message) {
  throw Error(format_error(file, line, message), location(file, line));
}

}  // namespace detail
}  // namespace dpt
