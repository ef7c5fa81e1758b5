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
