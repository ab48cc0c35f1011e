// The guest's seed as a CD-ROM image, made in memory: an ISO 9660 file
// system whose root directory holds a few small files under their own names
// (Rock Ridge), which is what cloud-init's NoCloud source reads from a volume
// labelled "cidata", and what the guests' kernels mount. A prolog makes one
// per job: a program started for it (genisoimage) cost more than the rest of
// the seed together.
#pragma once
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace svm {

// The image's bytes. Files: (name, content) in any order; a name is at most
// 64 bytes of letters, digits, '-', '_' and '.', and no two names may differ
// only in case or in those three. The volume identifier is at most 32
// letters, digits and '_'. Files are read-only (0444), root's.
std::string iso9660_image(const std::string& volume_id, const std::vector<std::pair<std::string, std::string>>& files,
                          std::time_t made = std::time(nullptr));

}  // namespace svm
