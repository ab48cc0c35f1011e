#include "cgroup.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <sstream>

#include "cpuset.hpp"
#include "error.hpp"
#include "fs.hpp"

namespace svm {

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

static std::string mount_dir_for(const std::string& ctrl, const std::string& cgroup_root) {
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

std::string job_level_path(const std::string& path) {
    size_t pos = 0;
    while ((pos = path.find("/job_", pos)) != std::string::npos) {
        size_t end = path.find('/', pos + 1);
        std::string id = path.substr(pos + 5, end == std::string::npos ? std::string::npos : end - pos - 5);
        if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos)
            return end == std::string::npos ? path : path.substr(0, end);
        pos += 5;
    }
    return path;
}

int remove_job_cgroups(uint32_t job_id, const std::string& cgroup_root) {
    int removed = 0;
    std::string job = "job_" + std::to_string(job_id);
    std::function<void(const std::string&, int)> walk = [&](const std::string& dir, int depth) {
        if (depth > 6) return;
        for (const auto& name : list_dir(dir)) {
            std::string sub = path_join(dir, name);
            struct stat st;
            if (::lstat(sub.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
            if (name == job) {
                // Deepest first: task_N, step_*, then the job itself.
                std::function<void(const std::string&)> rm = [&](const std::string& d) {
                    for (const auto& n : list_dir(d)) {
                        std::string c = path_join(d, n);
                        struct stat cs;
                        if (::lstat(c.c_str(), &cs) == 0 && S_ISDIR(cs.st_mode)) rm(c);
                    }
                    if (::rmdir(d.c_str()) == 0) ++removed;
                };
                rm(sub);
            } else if (name.rfind("slurm", 0) == 0 || name.rfind("uid_", 0) == 0 || depth == 0) {
                walk(sub, depth + 1);
            }
        }
    };
    walk(cgroup_root, 0);
    return removed;
}

void join_cgroups_of(pid_t model, pid_t pid, const std::string& cgroup_root, bool job_level_freezer) {
    auto groups = cgroups_of(model);
    bool any = false;
    for (const auto& [ctrl_list, group_path] : groups) {
        const std::string& ctrl = ctrl_list;
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

std::string cgroup_dir(pid_t pid, const std::string& controller, const std::string& cgroup_root) {
    for (const auto& [ctrl, path] : cgroups_of(pid)) {
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

std::vector<int> cgroup_cpus(pid_t pid, const std::string& cgroup_root) {
    std::string d = cgroup_dir(pid, "cpuset", cgroup_root);
    if (d.empty()) SVM_THROW("process " + std::to_string(pid) + " has no cpuset cgroup");
    std::string f = path_join(d, "cpuset.cpus");
    std::string text;
    if (!read_file_if_exists(f, text)) text = read_file(path_join(d, "cpus"));
    return parse_cpulist(text);
}

std::optional<int64_t> cgroup_memory_limit(pid_t pid, const std::string& cgroup_root) {
    std::string d = cgroup_dir(pid, "memory", cgroup_root);
    if (d.empty()) return std::nullopt;
    // Walk up to the tightest limit (the job level holds Slurm's limit).
    std::optional<int64_t> best;
    std::string root = path_join(cgroup_root, "memory");
    for (std::string cur = d; cur.size() > root.size(); cur = cur.substr(0, cur.rfind('/'))) {
        std::string text;
        if (!read_file_if_exists(path_join(cur, "memory.limit_in_bytes"), text)) continue;
        long long v = std::stoll(trim(text));
        if (v <= 0 || v >= (1LL << 60)) continue;  // unlimited
        if (!best || v < *best) best = v;
    }
    return best;
}

}  // namespace svm
