// catch_main.cpp — main() for every Catch2 test program (Catch2 2 or 3): one
// Catch::Session, so a program can add its own set-up around it.
//
// Exit code 4 (dpt_test::kSkipExitCode) means "skipped" to CTest
// (SKIP_RETURN_CODE). Catch2 3 returns it only when every test it ran was
// skipped; Catch2 2 returns the number of failed assertions, so 4 failures
// would read as a skip: that count is reported as 5 instead (still a failure).
#define CATCH_CONFIG_RUNNER  // Catch2 2: we write main(); ignored by Catch2 3
#include "support/catch.h"

int main(int argc, char** argv) {
  int result = Catch::Session().run(argc, argv);
#if DPT_CATCH2_MAJOR < 3
  if (result == dpt_test::kSkipExitCode) result = dpt_test::kSkipExitCode + 1;
#endif
  return result;
}
