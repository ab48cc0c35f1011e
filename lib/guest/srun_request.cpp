#include "srun_request.hpp"

#include <cstdlib>

namespace svm {

SrunRequestLine parse_srun_request_line(const std::string& line) {
    SrunRequestLine r;
    auto space = line.find(' ');
    r.verb = line.substr(0, space);
    std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
    if (r.verb == "SRUN") {
        long n = std::strtol(arg.c_str(), nullptr, 10);
        r.count = n >= 1 && n <= kSrunFieldsMax ? n : 0;
        return r;
    }
    r.token = arg.substr(0, arg.find(' '));
    r.signal = arg.substr(arg.find(' ') + 1);
    return r;
}

std::optional<std::vector<std::string>> split_srun_fields(const std::string& bytes, long count) {
    std::vector<std::string> fields;
    size_t start = 0;
    while (static_cast<long>(fields.size()) < count) {
        size_t nul = bytes.find('\0', start);
        if (nul == std::string::npos || nul + 1 > kSrunFieldsMaxBytes) return std::nullopt;
        fields.push_back(bytes.substr(start, nul - start));
        start = nul + 1;
    }
    return fields;
}

}  // namespace svm
