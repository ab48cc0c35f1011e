#include "guest_script.hpp"

#include "error.hpp"
#include "guest_scripts.hpp"

namespace svm {

std::string guest_script(const std::string& name) {
    for (const auto& s : kGuestScripts)
        if (name == s.name) return s.text;
    SVM_THROW("no guest script " + name + " (lib/guest/scripts)");
}

std::string guest_script_body(const std::string& name) {
    std::string s = guest_script(name);
    if (s.rfind("#!", 0) != 0) return s;
    size_t at = 0;
    while (at < s.size() && s[at] == '#' && s.compare(at, 12, "# shellcheck") != 0) {
        size_t nl = s.find('\n', at);
        at = nl == std::string::npos ? s.size() : nl + 1;
    }
    return s.substr(at);
}

std::string sh_single_quote(const std::string& value, const std::string& what, bool lines) {
    if (value.find('\0') != std::string::npos) SVM_THROW(what + " holds a NUL byte, which no shell word can hold");
    if (!lines && value.find('\n') != std::string::npos) SVM_THROW(what + " \"" + value + "\" holds a line break");
    std::string out = "'";
    for (char c : value) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out + "'";
}

std::string sh_assignments(const std::vector<ScriptVar>& vars) {
    std::string s;
    for (const auto& v : vars) {
        bool ok = !v.name.empty() && !(v.name[0] >= '0' && v.name[0] <= '9');
        for (char c : v.name) ok = ok && ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
        if (!ok) SVM_THROW("not a shell variable's name: \"" + v.name + "\"");
        s += v.name + "=" + sh_single_quote(v.value, v.name, v.lines) + "\n";
    }
    return s;
}

std::string render_guest_script(const std::string& name, const std::vector<ScriptVar>& vars) {
    return sh_assignments(vars) + guest_script_body(name);
}

}  // namespace svm
