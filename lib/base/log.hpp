// Logging of the helper processes (prolog, epilog, keeper, task wrapper) on
// spdlog: one logger per process, every line tagged with the job (and node).
//
// Sinks, chosen per process:
//   syslog     facility daemon, ident = the program: "job 42 on node1: MESSAGE"
//   stderr     "<prefix>job 42: MESSAGE" (slurmd keeps the prolog's and the
//              epilog's; the keeper's goes to keeper.log; the wrapper's is the
//              job's output)
//   job file   <log_dir>/<node>/job_<id>.log, appended to by the prolog, the
//              keeper and the epilog of that job on that node, for admins:
//              "2025-01-31T10:00:00.123+01:00 slurm-vm-prolog[123] info: job 42 on node1: MESSAGE"
//              Created on the first line (plain jobs leave no file), root-only
//              (directories 0750, file 0640), never through a symlink.
// The SPANK plugin does not use this: it logs through Slurm.
#pragma once
#include <time.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fs.hpp"

namespace svm {
class Error;
}

namespace svm::log {

enum class Level { debug, info, warn, error };

struct Setup {
    std::string program;  // "slurm-vm-prolog": syslog ident, file lines
    uint32_t job_id = 0;  // 0: not known (yet)
    std::string node;
    bool syslog = false;  // to syslog, facility daemon (info and above)
    bool to_stderr = true;
    std::string stderr_prefix;  // "slurm-vm: " gives "slurm-vm: job 42: MESSAGE"
    Level stderr_level = Level::debug;
};

// Replaces the process's logger. Without init, lines go to stderr as
// "slurm-vm: MESSAGE".
void init(const Setup& s);
// Adds the per-job file <log_dir>/<node>/job_<id>.log (opened on the first
// line; a file that cannot be opened safely is reported once and skipped).
void add_job_file(const std::string& log_dir);
// Flushes and drops the logger (before exit).
void shutdown();

// One line per message: line breaks inside become " | ", and every other
// control character (C0 but for those, DEL, C1 as U+0080..U+009F) and every
// byte that is not well-formed UTF-8 becomes '?': a user's or a guest's text
// (a job name, a path, skopeo's or qemu-img's message) cannot move a reader's
// terminal cursor, clear a screen or forge a line.
void write(Level level, const std::string& message);
std::string one_line(const std::string& message);
// `text` with every control character and non-UTF-8 byte as '?'; line feeds
// and tabs kept when keep_newlines.
std::string neutralise(const std::string& text, bool keep_newlines);
inline void debug(const std::string& m) { write(Level::debug, m); }
inline void info(const std::string& m) { write(Level::info, m); }
inline void warn(const std::string& m) { write(Level::warn, m); }
inline void error(const std::string& m) { write(Level::error, m); }
// The error's chain at error level, then its trace (file:line) at debug.
void error(const Error& e);

// The steps of a sequence, each at debug level as "<what> (N ms)", N since
// the previous step (or the timer's start): a job's phases in its log.
class Steps {
public:
    Steps();
    void done(const std::string& what);

private:
    long last_ms_;
};

// --- Formats (pure; the tests check them) --------------------------------
// "job 42 on node1", "job 42", "node1", "" as known.
std::string job_tag(uint32_t job_id, const std::string& node);
// spdlog patterns of the three sinks.
std::string file_pattern(const Setup& s);
std::string syslog_pattern(const Setup& s);
std::string stderr_pattern(const Setup& s);

// --- Per-job files for admins ---------------------------------------------
std::string job_log_name(uint32_t job_id);      // "job_42.log"
std::string job_console_name(uint32_t job_id);  // "job_42.console.log"
// Opens <log_dir>/<node>/<name> for appending, creating the node directory
// (0750) and the file (0640) owned by this process's user. Refuses (throws) a
// symlink or anything but a regular file at <name>, a symlinked or foreign
// <log_dir>/<node>, and a log_dir or node directory that others may write to:
// no path a user controls is ever opened with root's rights.
UniqueFd open_job_log(const std::string& log_dir, const std::string& node, const std::string& name);
// Text a guest wrote, safe to show or store: no terminal escapes or other
// control characters (each becomes '?', as neutralise), no carriage returns.
std::string printable(const std::string& text);
// The last max_bytes of the guest's console log (a regular file, not followed
// through a symlink), printable.
std::string read_console(const std::string& console_log, size_t max_bytes);
// Appends the last max_bytes of the guest's console log (printable) (a regular file, not
// followed through a symlink) to <log_dir>/<node>/job_<id>.console.log under
// a header line; returns that file's path ("" when the console is empty).
std::string keep_console(const std::string& console_log, const std::string& log_dir, const std::string& node,
                         uint32_t job_id, size_t max_bytes = 4u << 20);
// Deletes the per-job files (job_<id>.log, job_<id>.console.log) in
// node_log_dir last written more than keep_days days before `now`, except
// those of the jobs in `keep`; returns the names (deleted, or that would be
// with dry_run). keep_days 0: nothing. A missing directory: nothing.
std::vector<std::string> prune_job_logs(const std::string& node_log_dir, int keep_days, const std::set<uint32_t>& keep,
                                        time_t now, bool dry_run);
// The last `lines` lines of text (the tail shown to the user).
std::string tail_lines(const std::string& text, size_t lines);

}  // namespace svm::log
