// The srun relay's framing (lib/guest/srun_request.hpp) on the fuzzer's
// bytes: what a guest's batch script sends to the relay of its batch step,
// which runs as the job's user on the host. The input is read as the relay
// reads it: a first line (at most kSrunLineMax bytes), then an SRUN
// request's NUL-terminated fields. Properties: an SRUN count is 0 or in
// range; the fields are as many as the count, without NULs, and together
// no longer than the bytes sent.
#include "srun_request.hpp"
#include "fuzz.hpp"

using svm::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string in = svm::fuzz::text(data, size);
    size_t nl = in.find('\n');
    if (nl == std::string::npos || nl >= svm::kSrunLineMax) return 0;  // the relay reads no request
    svm::SrunRequestLine req = svm::parse_srun_request_line(in.substr(0, nl));
    require(req.verb.find(' ') == std::string::npos, "a verb is one word");
    require(req.token.find(' ') == std::string::npos, "a token is one word");
    if (req.verb != "SRUN") return 0;
    require(req.count >= 0 && req.count <= svm::kSrunFieldsMax, "an SRUN count in range");
    if (req.count == 0) return 0;
    std::string rest = in.substr(nl + 1);
    auto fields = svm::split_srun_fields(rest, req.count);
    if (!fields) return 0;
    require(static_cast<long>(fields->size()) == req.count, "as many fields as said");
    size_t total = 0;
    for (const auto& f : *fields) {
        require(f.find('\0') == std::string::npos, "a field holds no NUL");
        total += f.size() + 1;
    }
    require(total <= rest.size() && total <= svm::kSrunFieldsMaxBytes, "fields within the bytes sent");
    return 0;
}
