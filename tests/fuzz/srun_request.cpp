// The srun relay's framing and option check (lib/guest/srun_options.hpp) on
// the fuzzer's bytes: what a guest's batch script sends to the relay of its
// batch step, which runs as the job's user on the host. Properties: a
// complete request has a known verb; an SRUN request's fields hold no NUL and
// fit in the bytes sent; a refusal of the request or of its options is one
// line without control characters (the guest's srun reads one line); the
// relay's reader, fed the bytes in pieces, frames them the same in linear work.
#include "fuzz.hpp"

namespace {
// One line for the guest's srun: no control character (UTF-8 may stay).
bool one_line(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return false;
    return !s.empty();
}
}  // namespace
#include "srun_options.hpp"

using svm::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string in = svm::fuzz::text(data, size);
    svm::RelayRequest r = svm::parse_relay_request(in);
    // The relay's reader, given the same bytes in pieces, answers the same.
    svm::RelayRequestReader reader;
    svm::RelayRequest piecewise;
    size_t step = 1 + size % 97;
    for (size_t at = 0; at < in.size() && piecewise.status == svm::RelayRequest::Status::incomplete; at += step)
        piecewise = reader.feed(std::string_view(in).substr(at, step));
    // (Past the bound the whole is refused, where a prefix may have been complete.)
    require(in.size() > svm::kRelayMaxRequest ||
                (piecewise.status == r.status && piecewise.fields == r.fields && piecewise.error == r.error),
            "the reader frames as parse_relay_request does");
    require(reader.scanned() <= 2 * in.size() + 1, "the reader's work is linear");
    if (r.status == svm::RelayRequest::Status::bad) {
        require(one_line(r.error), "a refusal is one line");
        return 0;
    }
    if (r.status != svm::RelayRequest::Status::complete) return 0;
    bool known = r.verb == "SRUN" || r.verb == "STDERR" || r.verb == "WAIT" || r.verb == "SIGNAL";
    require(known, "a complete request has a known verb");
    if (r.verb != "SRUN") return 0;
    require(!r.fields.empty() && r.fields.size() <= svm::kRelayMaxFields, "an SRUN request's fields in range");
    size_t total = 0;
    for (const auto& f : r.fields) {
        require(f.find('\0') == std::string::npos, "a field holds no NUL");
        total += f.size() + 1;
    }
    require(total <= in.size(), "fields within the bytes sent");
    std::vector<std::string> args(r.fields.begin() + 1, r.fields.end());
    std::string why = svm::check_guest_srun_args(args);
    require(why.empty() || one_line(why), "a refusal is one line");
    return 0;
}
