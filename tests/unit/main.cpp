// The unit tests' main. Catch2 2 makes one from CATCH_CONFIG_RUNNER's
// Session; Catch2 3 has Catch::Session in its library (tests/unit/catch.hpp).
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
