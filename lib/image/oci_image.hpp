// Disk images from an OCI registry, packaged the way KubeVirt's containerDisk
// is: a qcow2 (or raw) file under /disk/ in an image's layers.
//   --vm-image=docker://HOST[:PORT]/REPO[:TAG|@sha256:...]   (oci:// alike)
// Each node pulls with skopeo (the ecosystem's client, no home-made one),
// pinned to the manifest digest it resolved, extracts the disk file from the
// layer tarball with tar (to stdout: nothing of the tarball is created on the
// node), and keeps it in a per-node cache by that digest, shared by
// concurrent jobs, bounded in size (least recently used entries that no job
// on the node uses go first; `slurm-vm sweep` prunes too). The job then
// treats the cached file like any image (intake as the user, overlay); the
// VM record's digest is the OCI manifest digest.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace svm {

struct OciSettings {
    std::string skopeo = "/usr/bin/skopeo";
    std::string cache_dir = "/var/lib/slurm-vm/%n/oci";
    uint64_t cache_max_bytes = 100ULL << 30;
    std::vector<std::string> insecure_registries;  // HOST[:PORT] reached over plain HTTP (tests, lab)
    // The longest pull of one image, lock wait included: keep it well inside
    // Slurm's PrologEpilogTimeout (past which the prolog drains the node).
    int timeout_s = 300;
    uint64_t max_layer_bytes = 64ULL << 30;  // a layer, decompressed (a gzip bomb is refused)
    size_t max_layer_entries = 10000;        // tar entries in a layer
    // Free space the pulls leave on the cache's file system (the node's
    // overlays and logs may share it): an image that does not fit fails its
    // job, never the node.
    uint64_t reserve_bytes = 10ULL << 30;
};

// The bounds of one pass over a layer: decompressed bytes, tar entries, time.
struct LayerBounds {
    uint64_t max_bytes = 64ULL << 30;
    size_t max_entries = 10000;
    int timeout_ms = 300000;
};

// docker://... or oci://...
bool is_registry_ref(const std::string& value);
// Validates a reference and gives what skopeo takes ("docker://HOST/REPO:TAG");
// throws svm::Error with one sentence.
std::string skopeo_ref(const std::string& value);
// skopeo's error output as one line: the msg="..." of its last log line
// (unescaped), else that line; at most 300 bytes.
std::string skopeo_message(const std::string& err);
// The registry part (HOST[:PORT]) of a reference.
std::string registry_of(const std::string& value);

// The disk file inside an OCI image layout directory (as `skopeo copy ...
// oci:DIR` writes it): the last layer holding a regular file directly under
// disk/ ("disk/x.qcow2", "./disk/x.img" or "/disk/..."). Returns the layer
// blob's path and the member's name; throws one sentence when there is none
// or a layer passes a bound (each layer is read once, streamed: decompressed
// and listed by tar into layout_dir/.listing, never whole in memory).
struct DiskMember {
    std::string blob, member;
};
DiskMember find_disk_member(const std::string& layout_dir, const LayerBounds& bounds = {});

struct CachedOciImage {
    std::string path;    // the disk file in the cache (root's, 0644, in 0755 directories)
    std::string digest;  // "sha256:<hex>" of the image manifest
};

// Resolves the reference's manifest digest, pulls and extracts it unless the
// cache has it, and prunes the cache to its bound, keeping `in_use` (cache
// entry directories of the node's jobs) and the new entry. Failures throw
// svm::Error with one sentence (the registry, the reference, the content).
CachedOciImage pull_oci_disk(const OciSettings& s, const std::string& ref, const std::set<std::string>& in_use);

// The cache entry (directory) a disk file belongs to, "" if not in the cache.
std::string oci_cache_entry_of(const OciSettings& s, const std::string& disk_path);

// Removes least recently used entries until the cache holds at most
// max_bytes, never one in `in_use` or `keep`; returns the entries removed.
std::vector<std::string> prune_oci_cache(const std::string& cache_dir, uint64_t max_bytes,
                                         const std::set<std::string>& in_use, const std::string& keep = "");

}  // namespace svm
