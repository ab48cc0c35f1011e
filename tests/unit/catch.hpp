// Catch2 for the unit tests, whichever major version the distribution ships:
// Debian 12 has Catch2 2 (one header, catch2/catch.hpp), Debian 13 Catch2 3
// (catch2/catch_all.hpp, the string matchers in Catch::Matchers). The tests
// use the version 2 names (Catch::Contains, Catch::Equals,
// Catch::StartsWith, Catch::EndsWith); under Catch2 3 they are defined here in terms of the new
// ones.
#pragma once

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>

#include <string>

namespace Catch {
inline auto Contains(const std::string& s, CaseSensitive cs = CaseSensitive::Yes) {
    return Matchers::ContainsSubstring(s, cs);
}
using Matchers::EndsWith;
using Matchers::Equals;
using Matchers::StartsWith;
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif
