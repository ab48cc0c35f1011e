// Opening a user's files with the user's rights alone: the one way root gets
// at a path a user gave (an image, a kernel, a directory to share).
#pragma once
#include <sys/stat.h>

#include <string>
#include <vector>

#include "fs.hpp"
#include "proc.hpp"

namespace svm {

// One path to open as a user, and what came of it.
struct UserOpen {
    enum class Kind { file, directory };
    enum class Failed { none, stat, not_regular, open, replaced };
    std::string path;
    Kind kind = Kind::file;

    UniqueFd fd;  // this process's descriptor, open for reading
    Failed failed = Failed::none;
    int err = 0;        // errno of the stat or open that failed
    struct stat st {};  // the descriptor's (the opener's fstat); a file refused: the path's
};

// Opens every path as `as` would, each with its own outcome. A regular file
// is looked at first and opened only when it is one (O_NONBLOCK, O_NOCTTY:
// opening is all it does), then checked to be the file looked at; a
// directory is opened with O_DIRECTORY.
//
// The opener is a process with the user's uid, gid and groups and no
// capability that shares this process's memory and descriptor table
// (clone(2): CLONE_VM, CLONE_FILES, CLONE_VFORK, from a thread of its own
// that it suspends) and makes system calls only.
// No copy of this process is made: fork's page tables and the copy-on-write
// faults after it cost milliseconds, tens on a virtual machine. A user can
// neither trace nor signal it into doing anything else: becoming the user
// leaves the (shared) memory undumpable, and a killed opener just fails.
// Where fs.suid_dumpable is 1, which leaves a process that became a user
// traceable by that user, a forked copy opens the paths instead.
//
// False when the opener did not finish within timeout_ms (it is killed, and
// no outcome is set): a file system that does not answer. An opener that
// cannot die (a FUSE daemon took its lookup and never answers: the kernel's
// wait is uninterruptible) is given 2 s more, then left behind: the call
// returns all the same. Throws when it could not become the user.
enum class Opener { by_node, shared, forked };  // by_node: as above; the others for tests
bool open_as_user(const Credentials& as, std::vector<UserOpen>& files, int timeout_ms, Opener how = Opener::by_node);

}  // namespace svm
