// catch.h — the one include every test uses for Catch2, 2.x or 3.x.
//
// CMake finds whichever Catch2 the machine has (Debian 12 ships 2.13, Debian 13
// and Ubuntu 24.04 ship 3.x) and defines DPT_CATCH2_MAJOR. The two differ, for
// what dpt's tests use, in three places bridged here:
//   - the header: <catch2/catch.hpp> (2) vs <catch2/catch_all.hpp> (3);
//   - `Approx` is global in 2, `Catch::Approx` in 3;
//   - the substring matcher: `Catch::Contains` (2) vs
//     `Catch::Matchers::ContainsSubstring` (3). Tests write `contains_text(s)`;
//   - skipping: Catch2 3 has SKIP(); 2 has none. `DPT_SKIP(why)` prints why
//     and ends the test program with kSkipExitCode, the code Catch2 3 exits
//     with when every test it ran was skipped; CMake marks that code as a
//     CTest skip (SKIP_RETURN_CODE), so a GPU test on a machine without one
//     shows "Skipped", never "Passed". Each CTest entry runs one test case.
#pragma once

#include <cstdlib>
#include <iostream>
#include <string>

namespace dpt_test {
/// Exit code of a test program whose test was skipped (Catch2 3's own).
constexpr int kSkipExitCode = 4;
}  // namespace dpt_test

#if DPT_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>
using Catch::Approx;
/// Matches a message that contains `s` (case-sensitive); combine with && / ||.
inline auto contains_text(const std::string& s) { return Catch::Matchers::ContainsSubstring(s); }
/// Skips the running test case, saying why (a CTest "Skipped").
#define DPT_SKIP(why) SKIP(why)
#else
#include <catch2/catch.hpp>
/// Matches a message that contains `s` (case-sensitive); combine with && / ||.
inline auto contains_text(const std::string& s) { return Catch::Contains(s); }
/// Skips the running test case, saying why (a CTest "Skipped").
#define DPT_SKIP(why)                                              \
  do {                                                             \
    std::cout << "SKIPPED: " << (why) << std::endl;                \
    std::exit(dpt_test::kSkipExitCode);                            \
  } while (0)
#endif
