// --vm-save=PATH: when the job ends, the head guest's disk (its copy-on-write
// overlay with the image below it) becomes a new image at PATH, owned by the
// user, so that the next job can start from it. Root never writes the user's
// path: qemu-img runs as the user (uid, gid, groups) and reads the overlay
// through an ACL entry for the user that dies with the overlay; the user's
// image is only read, through a descriptor of the very file the prolog
// checked (never its path again), and the save is bounded in time: a save
// that fails or takes too long fails the save, never the node.
#pragma once
#include <cstdint>
#include <string>

#include "job_plan.hpp"

namespace svm {

// The syntax of a --vm-save value: absolute, one line, at most 1023 bytes,
// naming a file (no trailing '/', no "." or ".." component).
void check_save_path(const std::string& path);

// As the calling user (sbatch runs as the user): PATH's directory exists and
// the caller may create files in it, and an existing PATH is a regular file
// (it is replaced). Throws svm::Error with one sentence.
void check_save_path_as_self(const std::string& path);

// The prefix of the file written first, in PATH's directory, then renamed to
// PATH: the save adds a random suffix and makes it new (O_EXCL, O_NOFOLLOW),
// so that no other member of a shared directory can make it first.
std::string save_temp_path(const std::string& path, uint32_t job_id);

// How long a save may take: the node's save_timeout_s, and within Slurm's
// PrologEpilogTimeout (0 or 65534: none) at most half of it or all but two
// minutes, whichever is more (the epilog has the teardown still to do).
int save_bound_s(int configured_s, int prolog_epilog_timeout_s);

// qemu-img's --image-opts for the overlay (by path: root's directory) over
// the image as descriptor base_fd (/dev/fd/N) in its pinned format.
std::string save_image_opts(const std::string& overlay, const std::string& base_format, int base_fd);

// The epilog of the job's first node, before the overlay is removed: stops
// the guest (keeper, QEMU) if it still runs, then converts the overlay with
// its base into PATH as the user, all within timeout_s (then qemu-img's
// process group is killed). Throws svm::Error (one sentence for the user)
// when the save fails; PATH is then untouched and no temporary file is left.
void save_guest_disk(const JobPlan& p, const std::string& qemu_img, int timeout_s = 300);

// Where a save that failed after the job ended is told to the user (Slurm no
// longer takes updates of the job's record then): slurm-<jobid>.vm-save.txt
// in the job's working directory, written as the user.
std::string save_note_path(const JobPlan& p);
// Writes `sentence` there as the user; false when it could not (logged).
bool write_save_note(const JobPlan& p, const std::string& sentence);

}  // namespace svm
