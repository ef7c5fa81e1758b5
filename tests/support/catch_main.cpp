// catch_main.cpp — main() for every Catch2 test program (Catch2 2 or 3): one
// Catch::Session, so a program can add its own set-up around it.
//
// Exit code 4 (dpt_test::kSkipExitCode) means "skipped" to CTest
// (SKIP_RETURN_CODE). Catch2 3 returns it when every test it ran was skipped;
// but Catch2 2, and Catch2 3 before 3.7.1, also return the number of failed
// assertions, so a test with exactly 4 failures would read as a skip. A
// listener counts the run's failures, and a 4 that comes with failures is
// reported as 5 instead (still a failure). tests/grade/test_exit_codes.py
// checks both.
#if DPT_CATCH2_MAJOR < 3
#define CATCH_CONFIG_RUNNER               // Catch2 2: we write main(); ignored by Catch2 3
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // Catch2 2: TestEventListenerBase
#endif
#include "support/catch.h"

#if DPT_CATCH2_MAJOR >= 3
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>
#endif

#include <cstdint>

namespace {

std::uint64_t g_failures = 0;  // failed assertions and test cases of the run

#if DPT_CATCH2_MAJOR >= 3
using ListenerBase = Catch::EventListenerBase;
#else
using ListenerBase = Catch::TestEventListenerBase;
#endif

class FailureCount : public ListenerBase {
 public:
  using ListenerBase::ListenerBase;
  void testRunEnded(const Catch::TestRunStats& stats) override {
    g_failures = stats.totals.assertions.failed + stats.totals.testCases.failed;
    ListenerBase::testRunEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(FailureCount)

int main(int argc, char** argv) {
  int result = Catch::Session().run(argc, argv);
  if (result == dpt_test::kSkipExitCode && g_failures > 0) result = dpt_test::kSkipExitCode + 1;
  return result;
}
