// Access to a host device for one job's guest identity only: a POSIX ACL
// entry for the job's group on the device node (e.g. /dev/kvm), added by the
// prolog (recorded in the ledger first) and removed by the epilog. Other
// entries, the owner and the mode bits are left as the site set them.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace svm {

// Adds (or replaces) the entry "group:<gid>:rw-" on path's access ACL.
void grant_group_rw(const std::string& path, gid_t gid);
// Removes that entry (nothing to do when it is absent or path is gone);
// whether there was one to remove.
bool revoke_group(const std::string& path, gid_t gid);
// Adds (or replaces) "user:<uid>:<perm>" (perm: rwx bits, 0-7): the job's
// user reaching into root's job directory, or reading one root-owned file.
void grant_user(const std::string& path, uid_t uid, unsigned perm);
// Whether path's access ACL holds an entry for group gid.
bool has_group_entry(const std::string& path, gid_t gid);
// The groups with a named entry on path's access ACL (none when path is gone).
std::vector<gid_t> group_entries(const std::string& path);
// Whether an identity (uid, gid, supplementary groups) could open path for
// reading and writing, decided by the kernel in a child with that identity.
bool accessible_rw_as(const std::string& path, uid_t uid, gid_t gid);

}  // namespace svm
