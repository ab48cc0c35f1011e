// Shares over virtio-fs: one virtiofsd per shared directory, serving it with
// the job user's rights and nothing more.
//
// virtiofsd runs as the user (uid, primary group, supplementary groups) and
// never as root. Its sandbox (mount, pid and network namespaces, pivot_root
// into the shared directory) needs privileges in some user namespace: it gets
// them in one that root creates for it, mapping only the user's uid and
// primary gid to themselves. So it has no privilege over anything the user
// does not own, and the guest's files are the user's on the host. Because root
// owns that namespace, the user's own processes cannot ptrace virtiofsd (which
// maps the guest's memory): the kernel asks for CAP_SYS_PTRACE in it.
// Guest root is the user here too: creating files as uid 0 fails (EINVAL),
// reading and writing the user's files works. QEMU 7.2's virtiofsd drops its
// supplementary groups at start: what the user reaches only through a
// secondary group is out of reach over virtio-fs (9p keeps those groups).
//
// The keeper (root) makes the listening socket itself, 0660 root:<job group>
// in the job directory, and hands virtiofsd the descriptor (--fd): QEMU, which
// runs as the user with the job's group, connects to it; virtiofsd creates no
// file on the host for itself.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace svm {

// Which virtiofsd: QEMU's own (C; Debian 12's qemu-system-common) or the
// Rust one (Debian 13's and RHEL 9's package "virtiofsd"). They take other
// options, and the Rust one must run as (a namespace's) root: it is started
// as uid 0 of a user namespace that maps 0 to the user, and translates the
// guest user's uid to that 0 and back (see start_virtiofsd).
enum class VirtiofsdKind { qemu, rust };

struct VirtiofsdSpec {
    std::string binary;         // virtiofsd
    std::string source;         // the shared directory (the user's own)
    std::string mark;           // argv[0]: how the epilog recognises the process
    uid_t uid = 0;              // the user
    gid_t gid = 0;              // the user's primary group: the guest user's files get it
    std::vector<gid_t> groups;  // the user's supplementary groups
    gid_t job_gid = 0;          // the job's group: the socket's, for QEMU
    VirtiofsdKind kind = VirtiofsdKind::qemu;
};

// The kind of the virtiofsd at `binary`, from its --version ("virtiofsd
// version 7.2.x" is QEMU's, "virtiofsd 1.x" the Rust one); throws when it
// does not run. With a cache_dir (root's, created 0700), asked once per
// version of the program (fs.hpp file_version_key), not at every guest.
VirtiofsdKind virtiofsd_kind(const std::string& binary, const std::string& cache_dir = "");
VirtiofsdKind virtiofsd_kind_of_version(const std::string& version_output);

// The command line (argv[0] is the mark); the socket is descriptor socket_fd.
std::vector<std::string> virtiofsd_argv(const VirtiofsdSpec& s, int socket_fd);

// The virtiofsd to use: `configured` when set (must be executable), else
// the first of the known install paths that exists; throws when none.
std::string find_virtiofsd(const std::string& configured);

// Makes the listening socket at `path` (0660 root:job_gid) and starts
// virtiofsd on it with stderr to `log_fd`; returns its pid (a child of the
// caller, which reaps it). The caller must be root; it may have threads
// (spawn allocates nothing after fork).
pid_t start_virtiofsd(const VirtiofsdSpec& s, const std::string& socket_path, int log_fd);

// The argv[0] mark of share `index` of job `job_id`.
std::string virtiofsd_mark(uint32_t job_id, size_t index);

}  // namespace svm
