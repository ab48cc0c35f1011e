// Hugepage backing of the guest's memory. The node configuration says
// "hugepages": "off" (normal pages), "auto" (hugepages when the node has
// enough free ones, else normal pages, said in the keeper's log and
// guest.json) or "required" (the guest does not start without them), and
// optionally "hugepage_size_kib" (default: the kernel's default hugepage
// size). Pages are counted on the host NUMA node the guest's memory is bound
// to (sysfs node<N>/hugepages), or system-wide when it is not bound, and a
// hugetlbfs of that page size must be mounted (libvirt puts guest memory
// there). Reads only.
#pragma once
#include <cstdint>
#include <string>

#include "sysfs.hpp"

namespace svm {

// "off", "auto" or "required"; throws naming the key otherwise.
void check_hugepage_mode(const std::string& mode);

// The kernel's default hugepage size (proc/meminfo "Hugepagesize"), 2048
// when it cannot be read.
int64_t default_hugepage_kib(const SysfsRoot& root);

// The pool the guest would draw from:
// sys/devices/system/node/node<N>/hugepages/hugepages-<size>kB, or
// sys/kernel/mm/hugepages/hugepages-<size>kB when numa_node < 0.
std::string hugepage_pool_dir(const SysfsRoot& root, int64_t page_kib, int numa_node);

// True when a hugetlbfs with pages of this size is mounted (proc/mounts).
bool hugetlbfs_mounted(const SysfsRoot& root, int64_t page_kib);

// What the node lacks for a hugepage-backed guest of any size (no pool of
// that page size, none reserved, no hugetlbfs mounted); "" when nothing. The
// prolog's check for "required": static misconfiguration, the node's fault.
std::string hugepage_setup_problem(const SysfsRoot& root, int64_t page_kib, int numa_node);

struct MemoryBacking {
    int64_t page_kib = 0;    // 0 = normal pages
    int64_t memory_mib = 0;  // the guest's memory (whole hugepages when page_kib > 0)
    int64_t pages = 0;       // hugepages the guest takes
    std::string note;        // one line for the log and guest.json
};

// Decides the backing of a guest of memory_mib: with mode "required" and the
// node unable to back it, throws svm::Error with one sentence naming what is
// missing (free pages on which NUMA node, page size, mount).
MemoryBacking choose_memory_backing(const SysfsRoot& root, const std::string& mode, int64_t page_kib, int numa_node,
                                    int64_t memory_mib);

// "2048 KiB", "1 GiB"
std::string page_size_text(int64_t page_kib);

}  // namespace svm
