// Virtual nodes offered by the site: a catalogue of images the staff manage
// ("images" in the node configuration: --vm-image=NAME) and, per partition,
// whether a job runs in a VM ("partitions": optional, default, required).
// Pure logic: the plugin (at submit) and the prolog (on the node, with the
// job's actual partition) both decide through choose_vm().
#pragma once
#include <jansson.h>

#include <string>
#include <vector>

namespace svm {

// --vm-image=none: run on the host (refused where the partition requires a VM).
inline constexpr const char* kNoVmImage = "none";

struct CatalogueImage {
    std::string name;                     // what users pass to --vm-image
    std::string path;                     // absolute path of the disk image on the nodes
    std::string description;              // one line, shown by `slurm-vm images`
    std::string kernel, initrd, cmdline;  // optional direct kernel boot
};

enum class VmMode { optional, by_default, required };
const char* vm_mode_name(VmMode m);

struct PartitionPolicy {
    std::string name;
    VmMode mode = VmMode::optional;
    std::string image;  // catalogue name used when the job names no image
};

struct SiteCatalogue {
    std::vector<CatalogueImage> images;       // sorted by name
    std::vector<PartitionPolicy> partitions;  // sorted by name
    const CatalogueImage* find_image(const std::string& name) const;
    const PartitionPolicy* find_partition(const std::string& name) const;
};

// Reads the configuration's "images" and "partitions" objects (either may be
// null) once the node schema has accepted them (names, keys, paths, modes, a
// partition's image where its mode needs one: config.hpp validate_node_config),
// and refuses what it cannot say: a partition's image missing from "images".
SiteCatalogue parse_site_catalogue(const json_t* images, const json_t* partitions);

// A value of --vm-image that can only be a catalogue name (no '/'; letters,
// digits, '.', '_', '-', '+'; not "none").
bool is_catalogue_name(const std::string& value);

// Splits Slurm's comma-separated partition list ("a,b").
std::vector<std::string> split_partitions(const std::string& list);

// The partition(s) a command line of sbatch/salloc/srun asks for (-p X, -pX,
// --partition X, --partition=X; the last one wins, as in Slurm); "" if none.
std::string partition_from_args(const std::vector<std::string>& args);

// What a job runs in, given its --vm-image value (a path, a catalogue name,
// "none" or empty) and its partition(s) (at submit the ones it asked for,
// possibly several; on the node the one it runs in).
struct VmChoice {
    bool vm = false;                             // the job runs in a guest
    std::string image_name;                      // the catalogue entry, when one was used
    std::string image, kernel, initrd, cmdline;  // from the catalogue entry; image also a path as given
    std::string refusal;                         // non-empty: one sentence, the job must not run
};
VmChoice choose_vm(const SiteCatalogue& cat, const std::string& requested, const std::vector<std::string>& partitions);

// The table `slurm-vm images` prints (and --json's document).
std::string format_catalogue(const SiteCatalogue& cat);
std::string catalogue_json(const SiteCatalogue& cat);

}  // namespace svm
