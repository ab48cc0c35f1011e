// The guest's shell scripts (lib/guest/scripts/*, compiled in at build
// time) and the per-job values given to them: shell variable assignments at
// their top, each value single-quoted.
#pragma once
#include <string>
#include <vector>

namespace svm {

// The file lib/guest/scripts/`name` as it is. Throws if there is none.
std::string guest_script(const std::string& name);
// The same less its first line when it is "#!..." and the comment lines
// that follow it (what the file says to its readers), up to a shellcheck
// directive (kept: the rendered scripts are checked too).
std::string guest_script_body(const std::string& name);

// `value` as one word of sh: in single quotes, each ' as '\''. A NUL, which
// no shell word can hold, is refused; so is a line break unless `lines`
// (values that are lists of lines, or a file's bytes). Throws svm::Error
// naming `what`.
std::string sh_single_quote(const std::string& value, const std::string& what, bool lines = false);

struct ScriptVar {
    std::string name;  // [A-Z_][A-Z0-9_]*
    std::string value;
    bool lines = false;  // may hold line breaks
};
// "NAME='value'\n" per variable, in order.
std::string sh_assignments(const std::vector<ScriptVar>& vars);
// The variables' assignments, then guest_script_body(name).
std::string render_guest_script(const std::string& name, const std::vector<ScriptVar>& vars);

}  // namespace svm
