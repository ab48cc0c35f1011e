#include "vm_save.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dev_acl.hpp"
#include "embed_root.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "proc.hpp"
#include "vm_job.hpp"

namespace svm {

namespace {
std::string dir_of(const std::string& path) {
    auto pos = path.rfind('/');
    return pos == 0 ? "/" : path.substr(0, pos);
}
std::string base_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }
}  // namespace

void check_save_path(const std::string& path) {
    if (path.empty() || path[0] != '/') SVM_THROW("--vm-save needs an absolute path (" + path + ")");
    if (path.size() > 1023) SVM_THROW("the --vm-save path is longer than 1023 bytes");
    if (path.find('\n') != std::string::npos || path.find('\r') != std::string::npos)
        SVM_THROW("the --vm-save path must be a single line");
    if (path.back() == '/') SVM_THROW("--vm-save=" + path + " names a directory; name the image file to write");
    std::string b = base_of(path);
    if (b == "." || b == ".." || path.find("/../") != std::string::npos || path.find("/./") != std::string::npos)
        SVM_THROW("--vm-save=" + path + " must name the file directly (no \".\" or \"..\" components)");
}

void check_save_path_as_self(const std::string& path) {
    check_save_path(path);
    std::string dir = dir_of(path);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            SVM_THROW("--vm-save=" + path + ": the directory " + dir + " does not exist");
        SVM_THROW("--vm-save=" + path + ": you cannot create files in " + dir + " (" + std::strerror(errno) + ")");
    }
    if (!S_ISDIR(st.st_mode)) SVM_THROW("--vm-save=" + path + ": " + dir + " is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        SVM_THROW("--vm-save=" + path + ": you cannot create files in " + dir + " (" + std::strerror(errno) + ")");
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        SVM_THROW("--vm-save=" + path + " exists and is not a regular file");
}

std::string save_temp_path(const std::string& path, uint32_t job_id) {
    std::string dir = dir_of(path);
    return path_join(dir, "." + base_of(path) + ".slurm-vm-save." + std::to_string(job_id));
}

void save_guest_disk(const JobPlan& p, const std::string& qemu_img, int timeout_s) {
    check_save_path(p.save_path);
    // 1. The guest is over: nothing may write the overlay while it is read.
    stop_recorded_process(p.keeper_pid_file(), keeper_mark(p.job_id), 8000);
    stop_recorded_process(qemu_pid_file(p.embed_root(), p.domain_name), qemu_mark(p.domain_name), 0);
    std::string overlay = p.overlay();
    if (!path_exists(overlay)) SVM_THROW("the guest's disk on " + p.node + " is gone; nothing was saved");
    // 2. The user reads the overlay (their guest's own data), nothing else of
    // the job's: an ACL entry on it and pass-through on its directory, both
    // removed with the overlay by the epilog right after.
    if (!p.overlay_dir.empty()) grant_user(p.overlay_dir, p.uid, 1);
    grant_user(overlay, p.uid, 4);
    // 3. qemu-img as the user, into a file of the user's next to PATH; then
    // renamed over PATH (also as the user).
    Credentials who = credentials_for(p.uid, p.gid);
    std::string tmp = save_temp_path(p.save_path, p.job_id);
    RunOptions o;
    o.as = who;
    o.timeout_ms = timeout_s * 1000;
    auto remove_tmp = [&] {
        run_function_as(who, [&](int) { return ::unlink(tmp.c_str()) == 0 || errno == ENOENT ? 0 : 1; });
    };
    RunResult r = run({qemu_img, "convert", "-q", "-f", "qcow2", "-O", "qcow2", overlay, tmp}, o);
    if (!r.ok()) {
        remove_tmp();
        std::string err = trim(r.err);
        if (err.size() > 300) err = err.substr(0, 300) + "...";
        SVM_THROW("--vm-save=" + p.save_path + ": the guest's disk could not be written as " + p.user +
                  (r.timed_out ? " (timed out after " + std::to_string(timeout_s) + " s)" : ": " + err));
    }
    RunResult mv =
        run_function_as(who, [&](int) { return ::rename(tmp.c_str(), p.save_path.c_str()) == 0 ? 0 : errno; });
    if (!mv.ok()) {
        remove_tmp();
        SVM_THROW("--vm-save=" + p.save_path + ": rename of the written image failed as " + p.user + ": " +
                  std::strerror(mv.status > 0 && mv.status < 128 ? mv.status : EIO));
    }
    log::info("the guest's disk was saved to " + p.save_path + " (as " + p.user + ")");
}

std::string save_note_path(const JobPlan& p) {
    return path_join(p.workdir.empty() ? p.home : p.workdir, "slurm-" + std::to_string(p.job_id) + ".vm-save.txt");
}

bool write_save_note(const JobPlan& p, const std::string& sentence) {
    std::string path = save_note_path(p), text = "slurm-vm: job " + std::to_string(p.job_id) + ": " + sentence + "\n";
    Credentials who = credentials_for(p.uid, p.gid);
    RunResult r = run_function_as(who, [&](int) {
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) return 1;
        bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        return ::close(fd) == 0 && ok ? 0 : 1;
    });
    if (!r.ok()) log::warn("could not tell " + p.user + " in " + path + " why the save failed");
    return r.ok();
}

}  // namespace svm
