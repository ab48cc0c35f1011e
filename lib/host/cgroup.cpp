#include "cgroup.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "cpuset.hpp"
#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "log.hpp"

namespace svm {

namespace {

// The file's decimal value (at most INT64_MAX: v1 writes "no limit" as a
// huge number); throws naming the file when it is not one.
int64_t parse_bytes(const std::string& text, const std::string& file) {
    std::string t = trim(text);
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos)
        SVM_THROW(file + ": \"" + t + "\" is not a number of bytes");
    errno = 0;
    long long v = std::strtoll(t.c_str(), nullptr, 10);
    return errno == ERANGE ? INT64_MAX : v;
}

bool is_stepd_scope(const std::string& name, const std::string& node);

// End of the path's job component, npos when there is none: job_<digits>
// (cgroup v1, and v2 up to 25.11 or with CgroupJobIdPaths=yes), or on v2
// from 26.05 the job's SLUID right below slurmstepd's scope.
size_t job_component_end(const std::string& path) {
    std::string parent;
    for (size_t pos = path.find('/'); pos != std::string::npos;) {
        size_t end = path.find('/', pos + 1);
        if (end == std::string::npos) end = path.size();
        std::string name = path.substr(pos + 1, end - pos - 1);
        bool numbered = name.size() > 4 && name.compare(0, 4, "job_") == 0 &&
                        name.find_first_not_of("0123456789", 4) == std::string::npos;
        if (numbered || (is_sluid(name) && is_stepd_scope(parent, ""))) return end;
        parent = name;
        pos = end < path.size() ? end : std::string::npos;
    }
    return std::string::npos;
}

bool is_dir(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// rmdir of dir's subdirectories, deepest first, then of dir itself; a
// cgroup with processes (or a child that stays) is refused by the kernel and
// stays. Returns how many went.
int remove_empty_tree(const std::string& dir) {
    int removed = 0;
    for (const auto& name : list_dir(dir)) {
        std::string sub = path_join(dir, name);
        if (is_dir(sub)) removed += remove_empty_tree(sub);
    }
    if (::rmdir(dir.c_str()) == 0) ++removed;
    return removed;
}

// "/a/b/c" -> "/a/b/c", "/a/b", "/a", "/".
std::vector<std::string> self_and_ancestors(const std::string& path) {
    std::vector<std::string> out;
    std::string cur = path.empty() ? "/" : path;
    while (cur.size() > 1 && cur.back() == '/') cur.pop_back();
    while (true) {
        out.push_back(cur);
        if (cur == "/") break;
        size_t slash = cur.rfind('/');
        cur = slash == 0 || slash == std::string::npos ? "/" : cur.substr(0, slash);
    }
    return out;
}

// ---- cgroup v1 -------------------------------------------------------------

std::string mount_dir_for(const std::string& ctrl, const std::string& cgroup_root) {
    // Debian mounts each v1 hierarchy at /sys/fs/cgroup/<list>; "name=systemd" at .../systemd.
    std::string name = ctrl;
    if (name.rfind("name=", 0) == 0) name = name.substr(5);
    std::string d = path_join(cgroup_root, name);
    if (path_exists(d)) return d;
    // Comounted "cpu,cpuacct" may also be reachable as /sys/fs/cgroup/cpu.
    auto comma = name.find(',');
    if (comma != std::string::npos) {
        d = path_join(cgroup_root, name.substr(0, comma));
        if (path_exists(d)) return d;
    }
    return "";
}

void join_v1(pid_t model, pid_t pid, const std::string& cgroup_root, bool job_level_freezer,
             const std::string& proc_root) {
    bool any = false;
    for (const auto& [ctrl, group_path] : cgroups_of(model, proc_root)) {
        std::string path = group_path;
        if (path == "/" || path.empty()) continue;
        std::string dir = mount_dir_for(ctrl, cgroup_root);
        if (dir.empty()) continue;
        if (job_level_freezer && ("," + ctrl + ",").find(",freezer,") != std::string::npos) path = job_level_path(path);
        std::string procs = path_join(path_join(dir, path), "cgroup.procs");
        try {
            write_sysfs(procs, std::to_string(pid));
        } catch (Error& e) {
            SVM_CONTEXT(e, "move process " + std::to_string(pid) + " into the job's " + ctrl + " cgroup");
            throw;
        }
        any = true;
    }
    if (!any) SVM_THROW("process " + std::to_string(model) + " is in no job cgroup (is PrologFlags=Contain set?)");
}

int remove_job_v1(uint32_t job_id, const std::string& cgroup_root, int& left) {
    int removed = 0;
    std::string job = "job_" + std::to_string(job_id);
    std::function<void(const std::string&, int)> walk = [&](const std::string& dir, int depth) {
        if (depth > 6) return;
        for (const auto& name : list_dir(dir)) {
            std::string sub = path_join(dir, name);
            if (!is_dir(sub)) continue;
            if (name == job) {
                removed += remove_empty_tree(sub);
                if (is_dir(sub)) ++left;
            } else if (name.rfind("slurm", 0) == 0 || name.rfind("uid_", 0) == 0 || depth == 0) walk(sub, depth + 1);
        }
    };
    walk(cgroup_root, 0);
    return removed;
}

std::vector<int> cpus_v1(pid_t pid, const std::string& cgroup_root, const std::string& proc_root) {
    std::string d = cgroup_dir(pid, "cpuset", cgroup_root, proc_root);
    if (d.empty()) SVM_THROW("process " + std::to_string(pid) + " has no cpuset cgroup");
    std::string f = path_join(d, "cpuset.cpus");
    std::string text;
    if (!read_file_if_exists(f, text)) text = read_file(path_join(d, "cpus"));
    return parse_cpulist(text);
}

std::optional<int64_t> memory_limit_v1(pid_t pid, const std::string& cgroup_root, const std::string& proc_root) {
    std::string d = cgroup_dir(pid, "memory", cgroup_root, proc_root);
    if (d.empty()) return std::nullopt;
    // Walk up to the tightest limit (the job level holds Slurm's limit).
    std::optional<int64_t> best;
    std::string root = path_join(cgroup_root, "memory");
    for (std::string cur = d; cur.size() > root.size(); cur = cur.substr(0, cur.rfind('/'))) {
        std::string file = path_join(cur, "memory.limit_in_bytes"), text;
        if (!read_file_if_exists(file, text)) continue;
        int64_t v = parse_bytes(text, file);
        if (v <= 0 || v >= (1LL << 60)) continue;  // unlimited
        if (!best || v < *best) best = v;
    }
    return best;
}

// ---- cgroup v2 -------------------------------------------------------------

constexpr const char* kGuestLeaf = "slurm_vm";

void join_v2(pid_t model, pid_t pid, const std::string& cgroup_root, bool out_of_step_signals,
             const std::string& proc_root) {
    std::string path = unified_cgroup_of(model, proc_root);
    if (job_component_end(path) == std::string::npos)
        SVM_THROW("process " + std::to_string(model) + " is in no job cgroup (" + (path.empty() ? "none" : path) +
                  "; is PrologFlags=Contain set?)");
    std::string target = out_of_step_signals ? guest_cgroup_v2(path) : path;
    std::string dir = path_join(cgroup_root, target);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) SVM_THROW_ERRNO("create cgroup " + dir);
    try {
        write_sysfs(path_join(dir, "cgroup.procs"), std::to_string(pid));
    } catch (Error& e) {
        SVM_CONTEXT(e, "move process " + std::to_string(pid) + " into the job's cgroup " + target);
        throw;
    }
}

bool is_stepd_scope(const std::string& name, const std::string& node) {
    if (name == "slurmstepd.scope") return true;
    return node.empty() ? ends_with(name, "_slurmstepd.scope") : name == node + "_slurmstepd.scope";
}

// slurmstepd's scopes: Slurm puts them in system.slice; slices nest (a.slice/a-b.slice).
void find_stepd_scopes(const std::string& dir, const std::string& node, int depth, std::vector<std::string>& out) {
    for (const auto& name : list_dir(dir)) {
        std::string sub = path_join(dir, name);
        if (!is_dir(sub)) continue;
        if (is_stepd_scope(name, node)) out.push_back(sub);
        else if (ends_with(name, ".slice") && depth < 3) find_stepd_scopes(sub, node, depth + 1, out);
    }
}

// slurmstepd takes this lock on its scope while it creates or removes a
// job's directories (cgroup/v2's common_cgroup_lock): a step starting in
// the job meanwhile keeps what it just made. Tidying is best effort: no lock
// (the scope went away meanwhile) is no reason to fail the epilog.
UniqueFd lock_scope(const std::string& scope) {
    UniqueFd fd(::open(scope.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    while (fd && ::flock(fd.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
    return fd;
}

bool populated(const std::string& cgroup) {
    std::string events;
    try {
        if (!read_file_if_exists(path_join(cgroup, "cgroup.events"), events)) return false;
    } catch (const Error&) {
        return false;
    }
    return events.find("populated 1") != std::string::npos;
}

// What is left of a guest in its leaf when its job is over (a share server
// that outlives QEMU by a moment, the processes of a keeper that was killed)
// is ended through cgroup.kill (Linux 5.14+), which takes the leaf and
// nothing else, and awaited for up to 2 s so that the leaf can go.
void end_guest_leaf(const std::string& leaf) {
    std::string kill = path_join(leaf, "cgroup.kill");
    if (!populated(leaf) || !path_exists(kill)) return;
    try {
        write_sysfs(kill, "1");
    } catch (const Error&) {
        return;  // the leaf stays, as a cgroup with processes does
    }
    poll_until(Deadline(Milliseconds(2000)), Milliseconds(20), [&] { return !populated(leaf); });
}

void end_guest_leaves(const std::string& dir) {
    for (const auto& name : list_dir(dir)) {
        std::string sub = path_join(dir, name);
        if (!is_dir(sub)) continue;
        if (name == kGuestLeaf) end_guest_leaf(sub);
        else end_guest_leaves(sub);
    }
}

// The job's directory in a scope: job_<id>, or (26.05+) its SLUID.
int remove_job_v2(const SlurmJob& job, const std::string& cgroup_root, const std::string& node, int& left) {
    std::vector<std::string> scopes;
    find_stepd_scopes(cgroup_root, node, 0, scopes);
    std::vector<std::string> names{"job_" + std::to_string(job.id)};
    if (is_sluid(job.sluid)) names.push_back(job.sluid);
    int removed = 0;
    for (const auto& scope : scopes) {
        for (const auto& name : names) {
            std::string dir = path_join(scope, name);
            if (!is_dir(dir)) continue;
            end_guest_leaves(dir);
            UniqueFd lock = lock_scope(scope);
            removed += remove_empty_tree(dir);
            if (is_dir(dir)) ++left;
        }
    }
    return removed;
}

std::vector<int> cpus_v2(pid_t pid, const std::string& cgroup_root, const std::string& proc_root) {
    // A leaf without the cpuset controller of its own (the guest's) has the
    // CPUs of its nearest ancestor that has it.
    for (const auto& cg : self_and_ancestors(unified_cgroup_of(pid, proc_root))) {
        std::string text;
        if (read_file_if_exists(path_join(path_join(cgroup_root, cg), "cpuset.cpus.effective"), text))
            return parse_cpulist(text);
    }
    SVM_THROW("process " + std::to_string(pid) +
              " has no cpuset (the cpuset controller is not enabled for its cgroup)");
}

std::optional<int64_t> memory_limit_v2(pid_t pid, const std::string& cgroup_root, const std::string& proc_root) {
    // Every ancestor's memory.max applies; Slurm sets the job's and the step's.
    std::optional<int64_t> best;
    for (const auto& cg : self_and_ancestors(unified_cgroup_of(pid, proc_root))) {
        std::string file = path_join(path_join(cgroup_root, cg), "memory.max"), text;
        if (!read_file_if_exists(file, text) || trim(text) == "max") continue;
        int64_t v = parse_bytes(text, file);
        if (!best || v < *best) best = v;
    }
    return best;
}

}  // namespace

bool is_sluid(const std::string& name) {
    static const std::string kDigits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";  // Crockford's base 32
    return name.size() == 14 && name[0] == 's' && name.find_first_not_of(kDigits, 1) == std::string::npos;
}

bool cgroup_unified(const std::string& cgroup_root) {
    return path_exists(path_join(cgroup_root, "cgroup.controllers"));
}

std::map<std::string, std::string> cgroups_of(pid_t pid, const std::string& proc_root) {
    std::map<std::string, std::string> out;
    std::string text = read_file(path_join(proc_root, std::to_string(pid) + "/cgroup"));
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        auto a = line.find(':');
        auto b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        std::string ctrl = line.substr(a + 1, b - a - 1);
        if (ctrl.empty()) continue;  // the v2 line
        out[ctrl] = line.substr(b + 1);
    }
    return out;
}

std::string unified_cgroup_of(pid_t pid, const std::string& proc_root) {
    std::istringstream in(read_file(path_join(proc_root, std::to_string(pid) + "/cgroup")));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return line.substr(3);
    return "";
}

// Where the guest goes on v2, and why there. What Slurm's cgroup/v2 plugin
// does with a step (22.05 to 25.11 alike):
//  - it signals a step by reading cgroup.procs of the step's own leaves only,
//    step_<s>/slurm and each task_<n> it created (cgroup_p_step_get_pids, not
//    recursive), and sends non-KILL signals only to the stepd's children
//    (to all of those leaves' processes with 24.11's SignalChildrenProcesses);
//  - from 25.05 a KILL goes through cgroup.kill of step_<s>/user, which takes
//    that whole subtree;
//  - it accounts a task by task_<n>/cpu.stat and memory.stat, which in v2
//    include every descendant cgroup.
// So a leaf below the extern task's cgroup is accounted with the extern
// step, limited by the job's and the step's cpuset and memory.max, and never
// signalled by Slurm before 25.05; from 25.05 only the extern step's final
// KILL (after every other step of the job has ended, so the job's tasks are
// done) or a KILL the user sends the job reach it, which end the guest as
// the epilog would. v2 allows it: the task's cgroup enables no controllers
// for its children, so it may hold the sleep and have this child (the
// no-internal-processes rule only binds cgroups that do). Slurm's own
// rmdir of the step then fails (busy); remove_job_cgroups tidies after the
// guest. Unlike v1, suspending the job (scontrol suspend: cgroup.freeze of
// step_<s>/user) freezes the guest with it, which is what a suspended job's
// CPUs are for.
// Two limits, of Slurm's extern step rather than of this placement (seen in
// the lab, tests/lab/slurm-v2): up to 24.11 the extern step's task is a
// sleep that a job-wide scancel --signal also reaches; it dies, the step
// ends and its accounting stops there (the guest lives on, as on v1). From
// 25.05 there is no sleep and no task cgroup in the extern step: the keeper
// then models on slurmstepd (.../step_extern/slurm) and the guest goes to
// .../step_extern/user/slurm_vm, limited and ended with the step, but in no
// task whose cpu.stat jobacct_gather reads.
std::string guest_cgroup_v2(const std::string& task_path) {
    size_t job_end = job_component_end(task_path);
    if (job_end == std::string::npos || task_path.compare(job_end, 6, "/step_") != 0)
        SVM_THROW("cgroup " + task_path + " is in no step of a Slurm job");
    size_t step_end = task_path.find('/', job_end + 1);
    std::string leaf = task_path.substr(task_path.rfind('/') + 1);
    if (leaf == kGuestLeaf) return task_path;
    // slurmstepd's own leaf: Slurm rmdirs it when the step ends, and the
    // step's limits are on .../user, not on the step.
    if (leaf == "slurm" && step_end == task_path.rfind('/'))
        return task_path.substr(0, step_end) + "/user/" + kGuestLeaf;
    return task_path + "/" + kGuestLeaf;
}

std::string job_level_path(const std::string& path) {
    size_t end = job_component_end(path);
    return end == std::string::npos ? path : path.substr(0, end);
}

void join_cgroups_of(pid_t model, pid_t pid, const std::string& cgroup_root, bool out_of_step_signals,
                     const std::string& proc_root) {
    if (cgroup_unified(cgroup_root)) join_v2(model, pid, cgroup_root, out_of_step_signals, proc_root);
    else join_v1(model, pid, cgroup_root, out_of_step_signals, proc_root);
}

int remove_job_cgroups(const SlurmJob& job, const std::string& cgroup_root, const std::string& node,
                       std::chrono::milliseconds wait) {
    const Deadline deadline(wait);
    const bool unified = cgroup_unified(cgroup_root);
    int removed = 0;
    for (auto pause = Milliseconds(10);; pause = std::min(pause * 2, Milliseconds(200))) {
        int left = 0;
        removed += unified ? remove_job_v2(job, cgroup_root, node, left) : remove_job_v1(job.id, cgroup_root, left);
        if (left == 0) return removed;
        if (deadline.expired()) {
            if (wait.count() > 0)
                log::warn("job " + std::to_string(job.id) + ": " + std::to_string(left) +
                          " of its cgroups still hold processes after " + std::to_string(wait.count()) +
                          " ms; they stay");
            return removed;
        }
        pause_for(std::min(pause, deadline.remaining()));
    }
}

std::string cgroup_dir(pid_t pid, const std::string& controller, const std::string& cgroup_root,
                       const std::string& proc_root) {
    if (cgroup_unified(cgroup_root)) {
        std::string path = unified_cgroup_of(pid, proc_root);
        return path.empty() ? "" : path_join(cgroup_root, path);
    }
    for (const auto& [ctrl, path] : cgroups_of(pid, proc_root)) {
        std::istringstream in(ctrl);
        std::string c;
        while (std::getline(in, c, ',')) {
            if (c == controller) {
                std::string dir = mount_dir_for(ctrl, cgroup_root);
                if (!dir.empty()) return path_join(dir, path);
            }
        }
    }
    return "";
}

std::vector<int> cgroup_cpus(pid_t pid, const std::string& cgroup_root, const std::string& proc_root) {
    return cgroup_unified(cgroup_root) ? cpus_v2(pid, cgroup_root, proc_root) : cpus_v1(pid, cgroup_root, proc_root);
}

std::optional<int64_t> cgroup_memory_limit(pid_t pid, const std::string& cgroup_root, const std::string& proc_root) {
    return cgroup_unified(cgroup_root) ? memory_limit_v2(pid, cgroup_root, proc_root)
                                       : memory_limit_v1(pid, cgroup_root, proc_root);
}

std::optional<int64_t> cgroup_oom_kills(pid_t pid, const std::string& cgroup_root, const std::string& proc_root) {
    std::string dir = cgroup_dir(pid, "memory", cgroup_root, proc_root);
    std::string text;
    if (dir.empty() || !read_file_if_exists(
                           path_join(dir, cgroup_unified(cgroup_root) ? "memory.events" : "memory.oom_control"), text))
        return std::nullopt;
    std::istringstream in(text);
    std::string key, value;
    while (in >> key >> value)
        if (key == "oom_kill") return parse_bytes(value, path_join(dir, "oom_kill"));
    return std::nullopt;
}

}  // namespace svm
