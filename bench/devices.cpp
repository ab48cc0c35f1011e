// svm-bench-devices: the device layer at scale on a fake sysfs tree
// (tests/unit/fake_sysfs: a FakeKernel reacting to bind/unbind/drivers_probe
// like Linux). A node with 8 GPUs (4 per NUMA node) and two InfiniBand PFs
// with 32 VFs each (64 VFs). Per job: plan (GRES file -> PCI functions),
// prepare (bind to vfio-pci, claim and configure a VF; every step recorded in
// a real ledger file first, as the prolog does) and release (the epilog's
// undo of that ledger). Prints JSON on stdout; exit 1 if the tree is not
// restored byte for byte or the fake kernel refused a write.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deadline.hpp"
#include "device_plan.hpp"
#include "device_scenarios.hpp"
#include "device_steps.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "ledger.hpp"

using namespace svm;
using namespace svm::test;

namespace {

double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void build_node(FakeSysfs& fs) {
    base_node(fs);
    eight_gpu_functions(fs);
    hca(fs, "0000:2b:00.0", 0, 100, 32, 32);  // VFs: groups 101-132
    hca(fs, "0000:ab:00.0", 1, 200, 32, 32);  // VFs: groups 201-232
}

std::string config_json(const std::string& state_dir) {
    std::string g;
    for (int i = 0; i < 8; ++i)
        g += std::string(i ? ", " : "") + R"({"pci": "0000:)" + kEightGpuBuses[i] + R"(:00.0", "nvidia_minor": )" +
             std::to_string(i) + "}";
    return R"({"gpus": [)" + g +
           R"(], "vf_providers": [{"pci": "0000:2b:00.0"}, {"pci": "0000:ab:00.0"}],
              "guid_prefix": "02:c9:fa:ce", "node_id": 258, "vf_state_dir": ")" +
           state_dir + R"("})";
}

struct Series {
    std::vector<double> plan, prepare, release;
    std::vector<int> writes;
};

std::string list(const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        char b[32];
        std::snprintf(b, sizeof b, "%s%.3f", i ? ", " : "", v[i]);
        s += b;
    }
    return s + "]";
}

// A directory for the ledgers and the VF pool state: on a node they live
// under /run (tmpfs), so the benchmark keeps them there too (the fake sysfs
// tree itself is under /tmp, as the unit tests make it).
struct StateDir {
    std::string path;
    explicit StateDir(const std::string& parent) {
        std::string tmpl = parent + "/svm-bench-devices-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!::mkdtemp(buf.data())) SVM_THROW_ERRNO("mkdtemp " + tmpl);
        path = buf.data();
        mkdir_p(path + "/ledger", 0700);
        mkdir_p(path + "/vf-pool", 0755);
    }
    ~StateDir() {
        try {
            remove_tree(path);
        } catch (...) {
        }
    }
};

struct Bench {
    FakeSysfs fs;
    StateDir dir;
    DeviceConfig cfg;
    SysfsRoot root;
    FakeKernel k;
    int next_job = 1000;

    explicit Bench(const std::string& state_parent) : dir(state_parent), root(fs.sysfs_root()), k(fs) {
        build_node(fs);
        cfg = config_from(config_json(dir.path + "/vf-pool"));
    }

    // One job's prolog half: plan + prepare; its ledger stays open for release().
    std::unique_ptr<Ledger> start(Series& s, const std::vector<std::string>& gres, bool want_vf) {
        uint32_t job = static_cast<uint32_t>(next_job++);
        auto l = std::make_unique<Ledger>(
            Ledger::load(path_join(dir.path + "/ledger", "job_" + std::to_string(job) + ".json"), job));
        int w0 = k.writes();
        double t0 = now_ms();
        DevicePlan plan = plan_devices(root, cfg, gres);
        double t1 = now_ms();
        DeviceStepOptions o;
        o.job = std::to_string(job);
        o.want_vf = want_vf;
        o.hostname = "node001";
        prepare_devices(root, k, cfg, plan, o, *l);
        double t2 = now_ms();
        s.plan.push_back(t1 - t0);
        s.prepare.push_back(t2 - t1);
        s.writes.push_back(k.writes() - w0);
        return l;
    }

    void release(Series& s, Ledger& l) {
        double t0 = now_ms();
        auto failures = undo_all(l, [this](const LedgerEntry& e) { undo_device_entry(root, k, cfg, e); });
        s.release.push_back(now_ms() - t0);
        if (!failures.empty()) SVM_THROW("release failed: " + failures.front());
    }
};

std::string series_json(const char* name, const char* what, int jobs_at_once, const Series& s) {
    double w = 0;
    for (int x : s.writes) w += x;
    char b[64];
    std::snprintf(b, sizeof b, "%.1f", s.writes.empty() ? 0.0 : w / static_cast<double>(s.writes.size()));
    return std::string("\"") + name + "\": {\"what\": \"" + what +
           "\", \"jobs_at_once\": " + std::to_string(jobs_at_once) +
           ", \"samples\": " + std::to_string(s.prepare.size()) + ", \"sysfs_writes_per_job\": " + b +
           ", \"plan_ms\": " + list(s.plan) + ", \"prepare_ms\": " + list(s.prepare) +
           ", \"release_ms\": " + list(s.release) + "}";
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 5;
    std::string state_parent = "/run";
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--state-parent") && i + 1 < argc) state_parent = argv[++i];
        else {
            std::fprintf(stderr, "usage: svm-bench-devices [--rounds N] [--state-parent DIR (default /run)]\n");
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    try {
        Bench b(state_parent);
        auto before = b.fs.snapshot();
        Series one_gpu, vf_only, all_gpus;
        for (int r = 0; r < rounds; ++r) {
            // Eight jobs with one GPU and one VF each, all live at once.
            std::vector<std::unique_ptr<Ledger>> live;
            for (int g = 0; g < 8; ++g) live.push_back(b.start(one_gpu, {"/dev/nvidia" + std::to_string(g)}, true));
            for (auto& l : live) b.release(one_gpu, *l);
            live.clear();
            // The VF pool filled: 64 jobs with a VF each (no GPU), all live at once.
            for (int j = 0; j < 64; ++j) live.push_back(b.start(vf_only, {}, true));
            for (auto& l : live) b.release(vf_only, *l);
            live.clear();
            // One job with all eight GPUs and a VF.
            std::vector<std::string> all;
            for (int g = 0; g < 8; ++g) all.push_back("/dev/nvidia" + std::to_string(g));
            auto l = b.start(all_gpus, all, true);
            b.release(all_gpus, *l);
        }
        std::string diff = b.fs.changes_since(before);
        bool restored = diff.empty() && b.k.refusals().empty();
        std::printf(
            "{\"node\": {\"gpus\": 8, \"vfs\": 64, \"numa_nodes\": 2}, \"rounds\": %d, \"restored\": %s, "
            "\"refusals\": %zu, \"scenarios\": {%s, %s, %s}}\n",
            rounds, restored ? "true" : "false", b.k.refusals().size(),
            series_json("one_gpu_one_vf", "1 GPU + 1 VF per job, 8 such jobs live at once", 8, one_gpu).c_str(),
            series_json("vf_only_pool_full", "1 VF per job, 64 such jobs live at once (pool filled)", 64, vf_only)
                .c_str(),
            series_json("eight_gpus_one_vf", "all 8 GPUs + 1 VF in one job", 1, all_gpus).c_str());
        if (!restored) {
            std::fprintf(stderr, "svm-bench-devices: the tree was not restored:\n%s\n", diff.c_str());
            return 1;
        }
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "svm-bench-devices: %s\n", e.chain().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "svm-bench-devices: %s\n", e.what());
        return 1;
    }
}
