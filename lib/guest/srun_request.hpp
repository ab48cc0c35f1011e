// The srun relay's framing (srun_relay.hpp's protocol), as pure functions
// over the bytes the guest sends: the request's first line, and an SRUN
// request's NUL-terminated fields. The relay reads the bytes; these say
// what they mean (and are fuzzed: tests/fuzz/srun_request.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace svm {

// The longest first line the relay reads; a longer one is refused.
inline constexpr size_t kSrunLineMax = 512;
// The most an SRUN request's fields may take, and their most.
inline constexpr size_t kSrunFieldsMaxBytes = size_t(8) << 20;
inline constexpr long kSrunFieldsMax = 100000;

struct SrunRequestLine {
    std::string verb;    // "SRUN", "STDERR", "WAIT", "SIGNAL", or whatever was sent
    long count = 0;      // SRUN: its number of fields, 1..kSrunFieldsMax; 0 when not a number in that range
    std::string token;   // the others: the run's token
    std::string signal;  // SIGNAL: the signal's name (the rest of the line)
};

// The first line of a request (without its '\n').
SrunRequestLine parse_srun_request_line(const std::string& line);

// The `count` fields at the start of `bytes`, each ended by a NUL; nullopt
// when `bytes` holds fewer (more bytes are needed) or they take more than
// kSrunFieldsMaxBytes. What follows the last field's NUL is not read.
std::optional<std::vector<std::string>> split_srun_fields(const std::string& bytes, long count);

}  // namespace svm
