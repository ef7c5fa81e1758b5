// listener_probe.cpp — test cases with known outcomes for the grade listener's
// own test (tests/grade/test_grade.py runs this with DPT_GRADE_JSON set and
// compares each JSON line with what these cases must produce).
#include <stdexcept>

#include "support/catch.h"

TEST_CASE("probe_hole: a failed check with its values", "[ch99][hole:probe_hole][needs:ch98]") {
  int world = 4;
  INFO("world = " << world);
  CHECK(world + 1 == 3);
  CHECK(world == 0);  // a second failure: only the first is reported
}

TEST_CASE("probe_other: a NotImplemented from a hole", "[ch99]") {
  throw std::runtime_error("not implemented: ch98 probe_dep — see exercises/98_probe/dep.cpp");
}

TEST_CASE("probe_other: passes", "[ch99]") { CHECK(1 + 1 == 2); }

// Hidden cases (run only when named) for tests/grade/test_exit_codes.py: the
// exit code CTest sees for exactly four failures, and for a skip.
TEST_CASE("probe_exit: exactly four failed checks", "[.exit_four]") {
  for (int i = 0; i < 4; ++i) CHECK(i < 0);
}

TEST_CASE("probe_exit: skipped", "[.exit_skip]") { DPT_SKIP("the probe skips on purpose"); }
