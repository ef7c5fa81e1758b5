// test_check.cpp — what a user reads from DPT_CHECK (the sentence, with the
// rank) and where a developer finds the source location (where(), DPT_DEBUG=1).
#include "support/catch.h"

#include <cstdlib>

#include "dpt/check.h"

namespace {
dpt::Error caught(int value) {
  try {
    DPT_CHECK(value == 0, "value is " << value << ", expected 0");
  } catch (const dpt::Error& e) {
    return e;
  }
  return dpt::Error("nothing thrown");
}

// Sets DPT_DEBUG for one scope and restores what was there.
struct DebugEnv {
  std::string old;
  bool had;
  explicit DebugEnv(const char* value) : had(std::getenv("DPT_DEBUG") != nullptr) {
    if (had) old = std::getenv("DPT_DEBUG");
    if (value) ::setenv("DPT_DEBUG", value, 1);
    else ::unsetenv("DPT_DEBUG");
  }
  ~DebugEnv() {
    if (had) ::setenv("DPT_DEBUG", old.c_str(), 1);
    else ::unsetenv("DPT_DEBUG");
  }
};
}  // namespace

TEST_CASE("a failed check reads as its sentence, the location is in where()", "[check]") {
  DebugEnv env(nullptr);
  dpt::Error e = caught(3);
  CHECK(std::string(e.what()) == "value is 3, expected 0");
  CHECK(e.where().rfind("test_check.cpp:", 0) == 0);
  dpt::set_error_rank(2);
  CHECK(std::string(caught(4).what()) == "[rank 2] value is 4, expected 0");
  dpt::set_error_rank(-1);
  DebugEnv off("0");
  CHECK(std::string(caught(5).what()) == "value is 5, expected 0");
}

TEST_CASE("DPT_DEBUG=1 puts the source location back into the message", "[check]") {
  DebugEnv env("1");
  std::string what = caught(3).what();
  CHECK(what.rfind("test_check.cpp:", 0) == 0);
  CHECK(what.find(": value is 3, expected 0") != std::string::npos);
}
