// check.cpp — formatting and throwing dpt::Error.
//
// A user reads the sentence; a developer can ask for the source location with
// DPT_DEBUG=1 (it is always in Error::where()).
#include "dpt/check.h"

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
