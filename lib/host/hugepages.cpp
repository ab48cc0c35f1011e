#include "hugepages.hpp"

#include <cstdlib>
#include <sstream>

#include "error.hpp"
#include "fs.hpp"

namespace svm {

namespace {

// "2M", "1G", "2048k" (hugetlbfs's pagesize= option) in KiB; 0 when unknown.
int64_t parse_size_kib(const std::string& s) {
    if (s.empty()) return 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (v <= 0 || end == s.c_str()) return 0;
    std::string unit = end;
    if (unit.empty()) return v / 1024;
    switch (unit[0]) {
    case 'k':
    case 'K': return v;
    case 'm':
    case 'M': return v * 1024;
    case 'g':
    case 'G': return v * 1024 * 1024;
    default: return 0;
    }
}

std::string where(int numa_node) { return numa_node >= 0 ? "NUMA node " + std::to_string(numa_node) : "the node"; }

int64_t read_count(const SysfsRoot& root, const std::string& file) {
    auto v = root.read_attr(file);
    if (!v || v->empty() || v->find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::atoll(v->c_str());
}

}  // namespace

void check_hugepage_mode(const std::string& mode) {
    if (mode != "off" && mode != "auto" && mode != "required")
        SVM_THROW("\"hugepages\" must be \"off\", \"auto\" or \"required\", not \"" + mode + "\"");
}

std::string page_size_text(int64_t page_kib) {
    if (page_kib >= 1024 * 1024 && page_kib % (1024 * 1024) == 0) return std::to_string(page_kib >> 20) + " GiB";
    return std::to_string(page_kib) + " KiB";
}

int64_t default_hugepage_kib(const SysfsRoot& root) {
    std::string text;
    try {
        if (!read_file_if_exists(root.proc("meminfo"), text)) return 2048;
    } catch (const Error&) {
        return 2048;
    }
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("Hugepagesize:", 0) != 0) continue;
        int64_t kib = std::atoll(line.c_str() + 13);
        return kib > 0 ? kib : 2048;
    }
    return 2048;
}

std::string hugepage_pool_dir(const SysfsRoot& root, int64_t page_kib, int numa_node) {
    std::string leaf = "hugepages-" + std::to_string(page_kib) + "kB";
    if (numa_node >= 0)
        return root.path("sys/devices/system/node/node" + std::to_string(numa_node) + "/hugepages/" + leaf);
    return root.path("sys/kernel/mm/hugepages/" + leaf);
}

bool hugetlbfs_mounted(const SysfsRoot& root, int64_t page_kib) {
    std::string text;
    try {
        if (!read_file_if_exists(root.proc("mounts"), text)) return false;
    } catch (const Error&) {
        return false;
    }
    std::istringstream in(text);
    std::string dev, dir, type, opts;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream l(line);
        if (!(l >> dev >> dir >> type >> opts) || type != "hugetlbfs") continue;
        int64_t size = 0;
        std::istringstream o(opts);
        std::string opt;
        while (std::getline(o, opt, ','))
            if (opt.rfind("pagesize=", 0) == 0) size = parse_size_kib(opt.substr(9));
        if (size == 0) size = default_hugepage_kib(root);  // mounted without pagesize=
        if (size == page_kib) return true;
    }
    return false;
}

std::string hugepage_setup_problem(const SysfsRoot& root, int64_t page_kib, int numa_node) {
    std::string pool = hugepage_pool_dir(root, page_kib, numa_node);
    std::string size = page_size_text(page_kib);
    if (!path_exists(pool))
        return "the kernel offers no " + size + " hugepages on " + where(numa_node) + " (no " + pool + ")";
    if (read_count(root, pool + "/nr_hugepages") <= 0)
        return "no " + size + " hugepages are reserved on " + where(numa_node) + " (" + pool + "/nr_hugepages is 0)";
    if (!hugetlbfs_mounted(root, page_kib))
        return "no hugetlbfs with " + size + " pages is mounted (e.g. mount -t hugetlbfs -o pagesize=" +
               (page_kib % (1024 * 1024) == 0 ? std::to_string(page_kib >> 20) + "G"
                                              : std::to_string(page_kib >> 10) + "M") +
               " none /dev/hugepages" + (page_kib % (1024 * 1024) == 0 ? "1G" : "") + ")";
    return "";
}

MemoryBacking choose_memory_backing(const SysfsRoot& root, const std::string& mode, int64_t page_kib, int numa_node,
                                    int64_t memory_mib) {
    check_hugepage_mode(mode);
    MemoryBacking b;
    b.memory_mib = memory_mib;
    if (mode == "off") {
        b.note = "normal pages (hugepages are off in the node configuration)";
        return b;
    }
    if (page_kib <= 0) page_kib = default_hugepage_kib(root);
    std::string size = page_size_text(page_kib);
    int64_t pages = memory_mib * 1024 / page_kib;
    std::string problem;
    if (pages == 0) {
        problem = "the guest's " + std::to_string(memory_mib) + " MiB is less than one " + size + " hugepage";
    } else {
        try {
            problem = hugepage_setup_problem(root, page_kib, numa_node);
            if (problem.empty()) {
                std::string pool = hugepage_pool_dir(root, page_kib, numa_node);
                int64_t free_pages = read_count(root, pool + "/free_hugepages");
                if (free_pages < pages)
                    problem = where(numa_node) + " has " + std::to_string(free_pages < 0 ? 0 : free_pages) + " free " +
                              size + " hugepages and the guest needs " + std::to_string(pages) + " (" +
                              std::to_string(pages * page_kib / 1024) + " MiB)";
            }
        } catch (const Error& e) {  // an unreadable sysfs file: not counted, so not enough
            problem = "the hugepage pool could not be read: " + e.reason();
        }
    }
    if (problem.empty()) {
        b.page_kib = page_kib;
        b.pages = pages;
        b.memory_mib = pages * page_kib / 1024;
        b.note = "hugepages: " + std::to_string(pages) + " pages of " + size + " on " + where(numa_node) + " (" +
                 std::to_string(b.memory_mib) + " MiB" +
                 (b.memory_mib != memory_mib ? ", rounded down from " + std::to_string(memory_mib) + " MiB" : "") + ")";
        return b;
    }
    if (mode == "required") SVM_THROW("hugepages are required by the node configuration, but " + problem);
    b.note = "normal pages: " + problem;
    return b;
}

}  // namespace svm
