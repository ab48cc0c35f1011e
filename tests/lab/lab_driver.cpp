// svm-lab-driver: runs the device layer inside the lab node (tests/lab/) against
// a real kernel, the way the prolog and epilog do: plan_devices(),
// prepare_devices() with every step recorded in a real ledger file before it
// is taken, undo_device_entry() in reverse order on failure and at the end.
//
//   plan     --config F --gres FILE...            print the plan, or the refusal (exit 1)
//   prepare  --config F --ledger L --job N --gres FILE... [--no-vf] [--fail-write K]
//            prolog: plan + prepare_devices; on failure undo the ledger (exit 1;
//            exit 3 when the rollback itself failed). Prints {"plan","prepared","writes"}.
//   vf-take  --config F --ledger L --job N [--numa N]
//            the VF half of prepare_devices without the per-VF identity (which
//            only mlx5-style PFs offer): vf_reservation + vfio_bind records.
//   undo     --config F --ledger L --job N         epilog: undo every recorded step
//   holders  --config F                            the VF pool's holders, as JSON
//   hold     --group G --device ADDR --seconds S [--ready FILE]
//            open the device through VFIO (container, group, device fd) like
//            QEMU does, and keep it open for S seconds
//   viable   --group G [--as-gid X]                VFIO_GROUP_GET_STATUS + SET_CONTAINER:
//            does the kernel accept the group for a guest? prints yes/no; with
//            --as-gid, tried as uid 65534 with only group X (a job's guest identity)
//   grant    --group G --gid X                     the job group X's ACL entry on /dev/vfio/G
//            (dev_acl, as the prolog gives a job its groups); revoke: take it back
//   cgroup-join --model PID [--then CMD]           the keeper's step 1: join_cgroups_of(PID,
//            self, out of the step's signals), then print {"cgroup","cpus","memory_max"}
//            as the keeper reads them and become CMD (sh -c), as QEMU inherits the cgroup
//   cgroup-remove --job N [--node NAME] [--sluid S]  remove_job_cgroups: {"removed"}
//   cgroup-undo --job N [--node NAME] [--sluid S]    the epilog's undo of the job_cgroups record: {"undone"}
//
// Every sysfs write is logged on stderr ("write #n path <- value").
#include <fcntl.h>
#include <grp.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cgroup.hpp"
#include "config.hpp"
#include "cpuset.hpp"
#include "dev_acl.hpp"
#include "device_config.hpp"
#include "device_plan.hpp"
#include "device_steps.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "host_changes.hpp"
#include "json.hpp"
#include "ledger.hpp"
#include "sysfs.hpp"
#include "vf_pool.hpp"
#include "vfio_binding.hpp"

namespace {

using namespace svm;

// The real writer, counting writes and failing the K-th one on request (EIO),
// before it reaches the kernel: a forced failure mid-way.
class LabWriter : public SysfsWriter {
public:
    explicit LabWriter(int fail_at) : fail_at_(fail_at) {}
    void write(const std::string& path, const std::string& value) override {
        ++n_;
        std::string shown = value == "\n" ? "\\n" : value;
        if (n_ == fail_at_) {
            std::fprintf(stderr, "write #%d %s <- %s: injected failure (EIO)\n", n_, path.c_str(), shown.c_str());
            throw SysfsWriteError(path, value, EIO, __FILE__, __LINE__, __func__);
        }
        auto t0 = std::chrono::steady_clock::now();
        try {
            real_.write(path, value);
        } catch (const SysfsWriteError& e) {
            std::fprintf(stderr, "write #%d %s <- %s: %s\n", n_, path.c_str(), shown.c_str(), e.reason().c_str());
            throw;
        }
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "write #%d %s <- %s (%.0f ms)\n", n_, path.c_str(), shown.c_str(), ms);
    }
    int writes() const { return n_; }

private:
    RealSysfsWriter real_;
    int fail_at_;
    int n_ = 0;
};

struct Opts {
    std::string cmd, config, ledger, device, ready, then, node, sluid;
    pid_t model = 0;
    uint32_t job = 0;
    std::vector<std::string> gres;
    bool want_vf = true;
    int fail_write = 0, group = -1, seconds = 0;
    long as_gid = -1, gid = -1;
    std::optional<int> numa;
};

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr, "svm-lab-driver: %s\n(see the comment at the top of tests/lab/lab_driver.cpp)\n", msg.c_str());
    std::exit(2);
}

Opts parse(int argc, char** argv) {
    Opts o;
    if (argc < 2) usage("no command");
    o.cmd = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--config") o.config = val();
        else if (a == "--ledger") o.ledger = val();
        else if (a == "--job") o.job = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--sluid") o.sluid = val();
        else if (a == "--gres") o.gres.push_back(val());
        else if (a == "--no-vf") o.want_vf = false;
        else if (a == "--fail-write") o.fail_write = std::stoi(val());
        else if (a == "--numa") o.numa = std::stoi(val());
        else if (a == "--group") o.group = std::stoi(val());
        else if (a == "--as-gid") o.as_gid = std::stol(val());
        else if (a == "--gid") o.gid = std::stol(val());
        else if (a == "--device") o.device = val();
        else if (a == "--seconds") o.seconds = std::stoi(val());
        else if (a == "--ready") o.ready = val();
        else if (a == "--model") o.model = static_cast<pid_t>(std::stol(val()));
        else if (a == "--then") o.then = val();
        else if (a == "--node") o.node = val();
        else usage("unknown option " + a);
    }
    return o;
}

void print_json(const json_t* j) { std::printf("%s\n", json_dump(j, true).c_str()); }

// {"<key>": "<message>"} plus an optional count.
void print_message(const char* key, const std::string& msg, const char* count_key = nullptr, size_t count = 0) {
    Json j(json_object());
    json_object_set_new(j.get(), key, json_string(msg.c_str()));
    if (count_key) json_object_set_new(j.get(), count_key, json_integer(static_cast<json_int_t>(count)));
    print_json(j.get());
}

// The epilog's walk: every device step in reverse order; returns the errors.
std::vector<std::string> undo_ledger(Ledger& ledger, const SysfsRoot& root, SysfsWriter& w, const DeviceConfig& cfg) {
    return undo_all(ledger, [&](const LedgerEntry& e) { undo_device_entry(root, w, cfg, e); });
}

// Each record, once durable, said on stderr.
Ledger& announced(Ledger& ledger) {
    Ledger::set_record_hook_for_tests([&ledger](const LedgerEntry& e) {
        std::fprintf(stderr, "ledger: recorded %s (%zu entries)\n", e.kind.c_str(), ledger.entries().size());
    });
    return ledger;
}

int rollback(Ledger& ledger, const SysfsRoot& root, SysfsWriter& w, const DeviceConfig& cfg, const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.chain().c_str());
    print_message("error", e.chain(), "rolled_back", ledger.entries().size());
    auto errs = undo_ledger(ledger, root, w, cfg);
    for (const auto& m : errs) std::fprintf(stderr, "rollback error: %s\n", m.c_str());
    return errs.empty() ? 1 : 3;
}

int cmd_plan(const Opts& o) {
    SysfsRoot root("/");
    DeviceConfig cfg = load_device_config(o.config);
    try {
        DevicePlan plan = plan_devices(root, cfg, o.gres);
        print_json(plan.to_json().get());
        return 0;
    } catch (const Error& e) {
        print_message("refused", e.chain());
        return 1;
    }
}

int cmd_prepare(const Opts& o) {
    SysfsRoot root("/");
    DeviceConfig cfg = load_device_config(o.config);
    LabWriter w(o.fail_write);
    Ledger ledger = Ledger::load(o.ledger, o.job);
    try {
        DevicePlan plan = plan_devices(root, cfg, o.gres);
        DeviceStepOptions so;
        so.job = std::to_string(o.job);
        so.want_vf = o.want_vf;
        so.hostname = "lab";
        PreparedDevices p = prepare_devices(root, w, cfg, plan, so, announced(ledger));
        Json out(json_object());
        json_object_set_new(out.get(), "plan", plan.to_json().release());
        json_t* hd = json_array();
        for (const auto& a : p.hostdevs) json_array_append_new(hd, json_string(a.str().c_str()));
        json_object_set_new(out.get(), "hostdevs", hd);
        json_object_set_new(out.get(), "vf", p.vf ? p.vf->to_json().release() : json_null());
        json_object_set_new(out.get(), "writes", json_integer(w.writes()));
        json_object_set_new(out.get(), "ledger_entries",
                            json_integer(static_cast<json_int_t>(ledger.entries().size())));
        print_json(out.get());
        return 0;
    } catch (const Error& e) {
        return rollback(ledger, root, w, cfg, e);
    }
}

int cmd_vf_take(const Opts& o) {
    SysfsRoot root("/");
    DeviceConfig cfg = load_device_config(o.config);
    LabWriter w(o.fail_write);
    Ledger ledger = Ledger::load(o.ledger, o.job);
    announced(ledger);
    try {
        VfPool pool(root, w, cfg, "lab");
        VfReservationRecord res{std::to_string(o.job)};
        ledger.record(res);
        VfAssignment vf = pool.reserve(res, o.numa);
        VfioBinder binder(root, w);
        if (!binder.already_bound(vf.vf)) {
            BindRecord br = binder.prepare(vf.vf);
            ledger.record(br);
            binder.bind(br);
            if (br.iommu_group >= 0) binder.verify_group_ready(br.iommu_group);
        }
        print_json(vf.to_json().get());
        return 0;
    } catch (const Error& e) {
        return rollback(ledger, root, w, cfg, e);
    }
}

int cmd_undo(const Opts& o) {
    SysfsRoot root("/");
    DeviceConfig cfg = load_device_config(o.config);
    LabWriter w(0);
    Ledger ledger = Ledger::load(o.ledger, o.job);
    size_t n = ledger.entries().size();
    auto t0 = std::chrono::steady_clock::now();
    auto errs = undo_ledger(ledger, root, w, cfg);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& m : errs) std::fprintf(stderr, "undo error: %s\n", m.c_str());
    std::printf("{\"undone\": %zu, \"errors\": %zu, \"writes\": %d, \"seconds\": %.2f}\n", n, errs.size(), w.writes(),
                s);
    return errs.empty() ? 0 : 1;
}

int cmd_holders(const Opts& o) {
    SysfsRoot root("/");
    DeviceConfig cfg = load_device_config(o.config);
    LabWriter w(0);
    Json j(json_object());
    for (const auto& [vf, job] : VfPool(root, w, cfg, "lab").holders())
        json_object_set_new(j.get(), vf.c_str(), json_string(job.c_str()));
    print_json(j.get());
    return 0;
}

// Opens the group the way QEMU's vfio code does. Returns the group fd, or -1
// with errno and a message.
int open_group(int group, int& container, std::string& why) {
    container = ::open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
    if (container < 0) return why = errno_message("open /dev/vfio/vfio"), -1;
    std::string gpath = "/dev/vfio/" + std::to_string(group);
    int g = ::open(gpath.c_str(), O_RDWR | O_CLOEXEC);
    if (g < 0) return why = errno_message("open " + gpath), -1;
    vfio_group_status st{};
    st.argsz = sizeof st;
    if (::ioctl(g, VFIO_GROUP_GET_STATUS, &st) < 0) return why = errno_message("VFIO_GROUP_GET_STATUS"), -1;
    if (!(st.flags & VFIO_GROUP_FLAGS_VIABLE)) {
        why = "group " + std::to_string(group) + " is not viable (VFIO_GROUP_FLAGS_VIABLE clear)";
        return -1;
    }
    if (::ioctl(g, VFIO_GROUP_SET_CONTAINER, &container) < 0)
        return why = errno_message("VFIO_GROUP_SET_CONTAINER"), -1;
    if (::ioctl(container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) < 0) return why = errno_message("VFIO_SET_IOMMU"), -1;
    return g;
}

int cmd_viable(const Opts& o) {
    if (o.as_gid >= 0) {
        // As a job's guest identity: an unprivileged uid with only that group.
        std::fflush(stdout);
        pid_t pid = ::fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            gid_t g = static_cast<gid_t>(o.as_gid);
            if (::setgroups(1, &g) != 0 || ::setgid(g) != 0 || ::setuid(65534) != 0) _exit(2);
            Opts mine = o;
            mine.as_gid = -1;
            _exit(cmd_viable(mine));
        }
        int st = 0;
        ::waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    int container = -1;
    std::string why;
    int g = open_group(o.group, container, why);
    std::printf("%s%s%s\n", g >= 0 ? "yes" : "no", g >= 0 ? "" : ": ", why.c_str());
    std::fflush(stdout);
    return g >= 0 ? 0 : 1;
}

int cmd_grant(const Opts& o, bool grant) {
    if (o.group < 0 || o.gid < 0) usage("grant/revoke need --group and --gid");
    std::string dev = "/dev/vfio/" + std::to_string(o.group);
    if (grant) grant_group_rw(dev, static_cast<gid_t>(o.gid));
    else revoke_group(dev, static_cast<gid_t>(o.gid));
    return 0;
}

int cmd_hold(const Opts& o) {
    int container = -1;
    std::string why;
    int g = open_group(o.group, container, why);
    if (g < 0) {
        std::fprintf(stderr, "hold: %s\n", why.c_str());
        return 1;
    }
    int dev = ::ioctl(g, VFIO_GROUP_GET_DEVICE_FD, o.device.c_str());
    if (dev < 0) {
        std::fprintf(stderr, "hold: %s\n", errno_message("VFIO_GROUP_GET_DEVICE_FD " + o.device).c_str());
        return 1;
    }
    std::printf("held %s (group %d) for %d s\n", o.device.c_str(), o.group, o.seconds);
    std::fflush(stdout);
    if (!o.ready.empty()) write_file_atomic(o.ready, "held\n");
    std::this_thread::sleep_for(std::chrono::seconds(o.seconds));
    ::close(dev);
    ::close(g);
    ::close(container);
    return 0;
}

int cmd_cgroup_join(const Opts& o) {
    if (o.model <= 0) usage("cgroup-join needs --model");
    join_cgroups_of(o.model, ::getpid(), "/sys/fs/cgroup", true);
    auto mem = cgroup_memory_limit(::getpid());
    Json j(json_object());
    json_object_set_new(j.get(), "cgroup", json_string(unified_cgroup_of(::getpid()).c_str()));
    json_object_set_new(j.get(), "cpus", json_string(format_cpulist(cgroup_cpus(::getpid())).c_str()));
    json_object_set_new(j.get(), "memory_max", mem ? json_integer(*mem) : json_null());
    print_json(j.get());
    std::fflush(stdout);
    if (o.then.empty()) return 0;
    ::execl("/bin/sh", "sh", "-c", o.then.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "%s\n", errno_message("exec /bin/sh").c_str());
    return 127;
}

int cmd_cgroup_remove(const Opts& o) {
    Json j(json_object());
    json_object_set_new(j.get(), "removed", json_integer(remove_job_cgroups({o.job, o.sluid}, kCgroupRoot, o.node)));
    print_json(j.get());
    return 0;
}

// The epilog's undo of the job's job_cgroups ledger record.
int cmd_cgroup_undo(const Opts& o) {
    NodeConfig cfg;
    cfg.node_name = o.node;
    undo_change(UndoScope{cfg, o.job}, {JobCgroupsChange::kind, JobCgroupsChange{kCgroupRoot, o.sluid}.to_json()});
    Json j(json_object());
    json_object_set_new(j.get(), "undone", json_string(JobCgroupsChange::kind));
    print_json(j.get());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Opts o = parse(argc, argv);
    try {
        if (o.cmd == "plan") return cmd_plan(o);
        if (o.cmd == "prepare") return cmd_prepare(o);
        if (o.cmd == "vf-take") return cmd_vf_take(o);
        if (o.cmd == "undo") return cmd_undo(o);
        if (o.cmd == "holders") return cmd_holders(o);
        if (o.cmd == "hold") return cmd_hold(o);
        if (o.cmd == "viable") return cmd_viable(o);
        if (o.cmd == "grant") return cmd_grant(o, true);
        if (o.cmd == "revoke") return cmd_grant(o, false);
        if (o.cmd == "cgroup-join") return cmd_cgroup_join(o);
        if (o.cmd == "cgroup-remove") return cmd_cgroup_remove(o);
        if (o.cmd == "cgroup-undo") return cmd_cgroup_undo(o);
    } catch (const Error& e) {
        std::fprintf(stderr, "svm-lab-driver %s: %s\n", o.cmd.c_str(), e.chain().c_str());
        return 1;
    }
    usage("unknown command " + o.cmd);
}
