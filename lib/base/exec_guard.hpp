// Which programs a process and its descendants may still execute (Linux
// Landlock, execute right only: reading, writing and mapping are untouched).
// The plugin applies it to the host side of a VM job's tasks, so that nothing
// of the user's runs on the host: not a --task-prolog or --task-epilog given
// with srun, not a program found through the user's PATH or SHELL.
#pragma once
#include <string>
#include <vector>

namespace svm {

// Allows execution only of the given files and of what lies beneath the
// given directories (missing ones are skipped), for this thread and every
// process it starts from now on; irreversible. Sets no_new_privs unless the
// caller may restrict itself without (CAP_SYS_ADMIN). Returns "" when
// applied, else why not (a kernel without Landlock).
std::string allow_exec_only(const std::vector<std::string>& paths);

// The ELF interpreter (PT_INTERP) a program names, "" if none or unreadable;
// reads at most the first 64 KiB.
std::string elf_interpreter(const std::string& program);

// The interpreter a "#!" script names (and, for "#!/usr/bin/env NAME",
// NAME found in `path`), "" for none; reads at most the first 256 bytes.
std::vector<std::string> script_interpreters(const std::string& script, const std::string& path);

// The first executable NAME in the directories of `path` (a PATH value).
std::string find_in_path(const std::string& name, const std::string& path);

}  // namespace svm
