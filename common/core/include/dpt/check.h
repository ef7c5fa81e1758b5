/// @file check.h
/// @brief Errors: `DPT_CHECK` and friends throw `dpt::Error` with a rank and a
/// sentence that says what was expected and what was seen.
///
/// Every failure a user can cause (a bad flag value, a mismatched checkpoint, a
/// device that runs out of memory, a ring that deadlocks) ends up here, so the
/// user reads one clear line instead of a raw abort or a hang.
///
///     DPT_CHECK(x.size(1) == w.size(1),
///               "linear: x has " << x.size(1) << " features, weight expects " << w.size(1));
///
/// The user reads the sentence only ("[rank 2] linear: x has 3 features, ...");
/// the source location stays in `Error::where()`, and with the environment
/// variable `DPT_DEBUG=1` it is put back into the message ("ops.cpp:41: ...")
/// for developers chasing where a check fired.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace dpt {

/// Every error dpt raises. `what()` reads "[rank R] message" ("[rank R]
/// file:line: message" under DPT_DEBUG=1).
class Error : public std::runtime_error {
 public:
  /// An error reading `what`, raised at `where` ("file.cpp:NN", or "" if unknown).
  explicit Error(const std::string& what, std::string where = "")
      : std::runtime_error(what), where_(std::move(where)) {}
  /// "file.cpp:NN" of the check that threw, or "" when it was not a DPT_CHECK.
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

/// Thrown by an exercise hole the student has not filled yet.
class NotImplemented : public Error {
 public:
  /// `what` names the hole and the file to fill, e.g. "ch01: sgd_update — see exercises/01_sgd/sgd.cpp".
  explicit NotImplemented(const std::string& what)
      : Error("not implemented: " + what) {}
};

/// Thrown when an allocation would exceed a device's capacity.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

/// Thrown when a rank waits on a peer longer than the communication timeout.
class Timeout : public Error {
 public:
  using Error::Error;
};

/// Labels errors raised on the calling thread with a rank (-1: no rank).
/// `dpt::launch` sets it on every rank thread / process.
void set_error_rank(int rank);
/// The rank errors raised on this thread are labelled with (-1 if none).
int error_rank();

/// Prints `line` and a newline on stderr in one write(2), so that the lines of
/// several processes sharing one terminal (mpirun forwards each rank's
/// stderr) never interleave: "ch07_zero: error: [rank 1] ..." stays whole.
void print_error_line(const std::string& line);

namespace detail {
/// True when the environment sets DPT_DEBUG to anything but "" or "0".
bool debug_enabled();
/// "[rank R] message"; under DPT_DEBUG=1 "[rank R] file:line: message".
std::string format_error(const char* file, int line, const std::string& message);
/// Throws dpt::Error(format_error(...)) with where() = "file:line".
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace dpt

/// Throws dpt::Error with `message` (a stream expression) unless `cond` holds.
#define DPT_CHECK(cond, message)                                           \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::ostringstream dpt_check_stream_;                                \
      dpt_check_stream_ << message;                                        \
      ::dpt::detail::throw_error(__FILE__, __LINE__, dpt_check_stream_.str()); \
    }                                                                      \
  } while (0)

/// Throws dpt::Error unconditionally.
#define DPT_FAIL(message) DPT_CHECK(false, message)
