// The srun relay's framing as pure functions (lib/guest/srun_request.hpp):
// what the relay makes of a guest's request line and fields. The relay end
// to end: test_srun_relay.cpp; the framing under the fuzzer:
// tests/fuzz/srun_request.cpp.
#include "catch.hpp"

#include "srun_request.hpp"

using svm::parse_srun_request_line;
using svm::split_srun_fields;

TEST_CASE("srun relay: request lines as the guest's shim writes them, and others", "[srun]") {
    auto srun = parse_srun_request_line("SRUN 3");
    CHECK(srun.verb == "SRUN");
    CHECK(srun.count == 3);
    // Counts out of range or not numbers are 0 (the relay answers "ERR bad request").
    for (const char* bad : {"SRUN", "SRUN 0", "SRUN -1", "SRUN 100001", "SRUN x", "SRUN 99999999999999999999999"})
        CHECK(parse_srun_request_line(bad).count == 0);
    CHECK(parse_srun_request_line("SRUN 100000").count == 100000);
    auto sig = parse_srun_request_line("SIGNAL 0123abcd TERM");
    CHECK(sig.verb == "SIGNAL");
    CHECK(sig.token == "0123abcd");
    CHECK(sig.signal == "TERM");
    auto wait = parse_srun_request_line("WAIT 0123abcd");
    CHECK(wait.token == "0123abcd");
    CHECK(parse_srun_request_line("").verb.empty());
    CHECK(parse_srun_request_line("STDERR").token.empty());
}

TEST_CASE("srun relay: an SRUN request's fields end at their count's last NUL", "[srun]") {
    std::string bytes("/home/u\0-N1\0hostname\0trailing", 29);
    auto f = split_srun_fields(bytes, 3);
    REQUIRE(f);
    CHECK(*f == std::vector<std::string>{"/home/u", "-N1", "hostname"});
    CHECK_FALSE(split_srun_fields(bytes, 4));  // the fourth is not ended yet
    CHECK(split_srun_fields(std::string(2, '\0'), 2) == std::vector<std::string>{"", ""});
    // More than 8 MiB of fields is refused, whatever follows.
    std::string big(svm::kSrunFieldsMaxBytes, 'a');
    big += '\0';
    CHECK_FALSE(split_srun_fields(big, 1));
    big.erase(0, 1);
    CHECK(split_srun_fields(big, 1));
}
