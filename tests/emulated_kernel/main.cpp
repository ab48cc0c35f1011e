// svm-emulated-kernel: the unit tests' emulated kernel (tests/unit/fake_sysfs.hpp)
// as a program, so that the prolog and epilog of the local test cluster can
// run their device steps against a fake sysfs tree (node configuration
// "devices": {"emulated_kernel": "<this program>"} with "sysfs_root": "<tree>").
//
//   svm-emulated-kernel ROOT FILE VALUE      one sysfs write, as the kernel would
//                                            take it; exit status = errno (0 = ok)
//   svm-emulated-kernel --build ROOT NAME    builds a node (NAME: gpu-node)
//   svm-emulated-kernel --busy ROOT PCI[@DRIVER] N
//                                            unbinding PCI (from DRIVER only, if
//                                            given) fails with EBUSY N times (-1 always)
// Every write is appended to ROOT/.emulated-kernel/writes.
//   svm-emulated-kernel --snapshot ROOT      every path with its content, one per line
//   svm-emulated-kernel --driver ROOT PCI    the driver PCI is bound to ("" = none)
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "../unit/device_scenarios.hpp"
#include "../unit/fake_sysfs.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

using namespace svm;
using namespace svm::test;

namespace {

void append_line(const std::string& file, const std::string& line) {
    FILE* f = std::fopen(file.c_str(), "a");
    if (!f) SVM_THROW_ERRNO("open " + file);
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
}

int usage() {
    std::fprintf(stderr,
                 "usage: svm-emulated-kernel ROOT FILE VALUE | --build ROOT gpu-node | --busy ROOT PCI N |\n"
                 "       --snapshot ROOT | --driver ROOT PCI\n");
    return 2;
}

// A GPU node: IOMMU on, two NUMA nodes, one GPU 0000:3b:00.0 on nvidia with
// its audio function 0000:3b:00.1 (group 7), an InfiniBand HCA 0000:2b:00.0
// with two VFs; dev/nvidia0 for gres.conf.
void build_gpu_node(const std::string& root) {
    if (path_exists(root)) remove_tree(root);
    FakeSysfs scratch;  // built in a temporary tree, then moved into place
    base_node(scratch);
    one_gpu(scratch);
    gpu_audio(scratch);
    hca(scratch, "0000:2b:00.0", 0, 30, 2);
    // What gres.conf names: Slurm only counts a character device (the nvidia
    // driver's major 195); a plain file where mknod is not allowed.
    if (::mknod(scratch.path("dev/nvidia0").c_str(), S_IFCHR | 0666, makedev(195, 0)) != 0)
        write_file_atomic(scratch.path("dev/nvidia0"), "", 0666);
    scratch.save_state();
    mkdir_p(root);
    ::chmod(scratch.root().c_str(), 0755);
    run_checked({"cp", "-a", scratch.root() + "/.", root + "/"});
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 4 && !std::strcmp(argv[1], "--build")) {
            if (std::string(argv[3]) != "gpu-node") return usage();
            build_gpu_node(argv[2]);
            return 0;
        }
        if (argc == 5 && !std::strcmp(argv[1], "--busy")) {
            FakeSysfs fs(argv[2], FakeSysfs::Adopt{});
            fs.busy()[argv[3]] = std::stoi(argv[4]);
            fs.save_state();
            return 0;
        }
        if (argc == 3 && !std::strcmp(argv[1], "--snapshot")) {
            FakeSysfs fs(argv[2], FakeSysfs::Adopt{});
            for (const auto& [k, v] : fs.snapshot()) {
                if (k.compare(0, 16, ".emulated-kernel") == 0) continue;
                std::string shown;
                for (char c : v)
                    shown += c == '\n' ? std::string("\\n") : c == '\0' ? std::string("\\0") : std::string(1, c);
                std::printf("%s\t%s\n", k.c_str(), shown.c_str());
            }
            return 0;
        }
        if (argc == 4 && !std::strcmp(argv[1], "--driver")) {
            FakeSysfs fs(argv[2], FakeSysfs::Adopt{});
            std::printf("%s\n", fs.driver_of(argv[3]).c_str());
            return 0;
        }
        if (argc != 4 || argv[1][0] == '-') return usage();
        FakeSysfs fs(argv[1], FakeSysfs::Adopt{});
        FakeKernel k(fs);
        for (const auto& [a, n] : fs.busy()) k.busy(a, n);
        int status = 0;
        try {
            k.write(argv[2], argv[3]);
        } catch (const SysfsWriteError& e) {
            std::fprintf(stderr, "%s\n", e.what());
            status = e.err() > 0 && e.err() < 128 ? e.err() : EIO;
        }
        fs.busy() = k.busy_left();
        fs.save_state();
        // Every write, for tests to see what happened: "rel <- value[ -> errno]".
        std::string line = k.log().empty() ? std::string(argv[2]) : k.log().back();
        if (status) line += " -> " + std::to_string(status);
        append_line(fs.path(".emulated-kernel/writes"), line);
        return status;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "svm-emulated-kernel: %s\n", e.what());
        return EIO;
    }
}
