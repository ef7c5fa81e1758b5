// check.cpp — formatting and throwing dpt::Error.
#include "dpt/check.h"

#include <cstring>

namespace dpt {

namespace {
thread_local int t_error_rank = -1;
}

void set_error_rank(int rank) { t_error_rank = rank; }
int error_rank() { return t_error_rank; }

namespace detail {

std::string format_error(const char* file, int line, const std::string& message) {
  const char* slash = std::strrchr(file, '/');
  std::ostringstream out;
  if (t_error_rank >= 0) out << "[rank " << t_error_rank << "] ";
  out << (slash ? slash + 1 : file) << ":" << line << ": " << message;
  return out.str();
}

void throw_error(const char* file, int line, const std::string& message) {
  throw Error(format_error(file, line, message));
}

}  // namespace detail
}  // namespace dpt
