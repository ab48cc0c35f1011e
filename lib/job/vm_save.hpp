// --vm-save=PATH: when the job ends, the head guest's disk (its copy-on-write
// overlay with the image below it) becomes a new image at PATH, owned by the
// user, so that the next job can start from it. Root never writes the user's
// path: qemu-img runs as the user (uid, gid, groups) and reads the overlay
// through an ACL entry for the user that dies with the overlay; the user's
// image is only read.
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

// The file written first, in PATH's directory, then renamed to PATH.
std::string save_temp_path(const std::string& path, uint32_t job_id);

// The epilog of the job's first node, before the overlay is removed: stops
// the guest (keeper, QEMU) if it still runs, then converts the overlay with
// its base into PATH as the user. Throws svm::Error (one sentence for the
// user) when the save fails; PATH is then untouched.
void save_guest_disk(const JobPlan& p, const std::string& qemu_img, int timeout_s = 1800);

// Where a save that failed after the job ended is told to the user (Slurm no
// longer takes updates of the job's record then): slurm-<jobid>.vm-save.txt
// in the job's working directory, written as the user.
std::string save_note_path(const JobPlan& p);
// Writes `sentence` there as the user; false when it could not (logged).
bool write_save_note(const JobPlan& p, const std::string& sentence);

}  // namespace svm
