// catch.h — the one include every test uses for Catch2, 2.x or 3.x.
//
// CMake finds whichever Catch2 the machine has (Debian 12 ships 2.13, Debian 13
// and Ubuntu 24.04 ship 3.x) and defines DPT_CATCH2_MAJOR. The two differ, for
// what dpt's tests use, in three places bridged here:
//   - the header: <catch2/catch.hpp> (2) vs <catch2/catch_all.hpp> (3);
//   - `Approx` is global in 2, `Catch::Approx` in 3;
//   - the substring matcher: `Catch::Contains` (2) vs
//     `Catch::Matchers::ContainsSubstring` (3). Tests write `contains_text(s)`.
#pragma once

#include <string>

#if DPT_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>
using Catch::Approx;
/// Matches a message that contains `s` (case-sensitive); combine with && / ||.
inline auto contains_text(const std::string& s) { return Catch::Matchers::ContainsSubstring(s); }
#else
#include <catch2/catch.hpp>
/// Matches a message that contains `s` (case-sensitive); combine with && / ||.
inline auto contains_text(const std::string& s) { return Catch::Contains(s); }
#endif
