// The SPANK plugin's logic (lib/job/plugin.hpp) against a fake Slurm: what it
// passes to the job, what it refuses and how it routes a task.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "catch.hpp"

#include <algorithm>

#include <map>

#include "fs.hpp"
#include "plugin.hpp"
#include "support.hpp"

namespace {

struct FakeHost final : svm::PluginHost {
    std::string default_part;
    std::map<std::string, std::string> passed, task;
    std::string wrapped, image;
    std::vector<std::string> infos, errors;

    std::string default_partition() override { return default_part; }
    void pass_to_job(const std::string& n, const std::string& v) override { passed[n] = v; }
    std::optional<std::string> task_env(const std::string& n) override {
        auto it = task.find(n);
        return it == task.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
    void set_task_env(const std::string& n, const std::string& v) override { task[n] = v; }
    void unset_task_env(const std::string& n) override { task.erase(n); }
    std::vector<std::string> task_env_names() override {
        std::vector<std::string> v;
        for (const auto& [n, _] : task) v.push_back(n);
        return v;
    }
    void wrap_task(const std::string& exec) override { wrapped = exec; }
    std::vector<std::string> site_task_scripts() override { return site_scripts; }
    void restrict_exec(const std::vector<std::string>& a) override { exec_allowed = a; }
    std::string requested_image() override { return image; }
    std::vector<std::string> site_scripts, exec_allowed;
    void log_info(const std::string& m) override { infos.push_back(m); }
    void log_error(const std::string& m) override { errors.push_back(m); }
};

// A node configuration with state_dir DIR/%n, a catalogue image and a
// partition that requires a VM; returns its path.
std::string write_config(const std::string& dir, const std::string& libexec = "/opt/svm/libexec") {
    std::string path = dir + "/slurm-vm.json";
    svm::write_file_atomic(path, R"({"state_dir": ")" + dir + R"(/state/%n", "libexec_dir": ")" + libexec + R"(",
        "images": {"site1": {"path": ")" +
                                     dir + R"(/site1.qcow2"}},
        "partitions": {"vmonly": {"vm": "required", "image": "site1"}}})");
    return path;
}

// This node's plan of job `job` as the prolog writes it.
svm::JobPlan write_plan(const std::string& dir, const std::string& node, uint32_t job, int index) {
    svm::JobPlan p;
    p.job_id = job;
    p.node = node;
    p.node_index = index;
    p.uid = 4242;
    p.dir = dir + "/state/" + node + "/job_" + std::to_string(job);
    svm::mkdir_p(p.dir, 0755);
    svm::write_file_atomic(p.plan_file(), p.to_json());
    return p;
}

svm::SubmitProcess process(std::vector<std::string> env, std::vector<std::string> args = {"sbatch"}) {
    svm::SubmitProcess p;
    p.env = std::move(env);
    p.args = std::move(args);
    p.cwd = "/nonexistent-cwd";
    return p;
}

// A job's submission as the plugin sees it: a host that records what it is
// told, and options naming a node configuration in a directory of its own.
struct PluginJob {
    svm::test::TempDir d{"svm-plugin"};
    FakeHost host;
    svm::PluginOptions o;
    PluginJob() { o.config = write_config(d.path()); }
};

}  // namespace

TEST_CASE("plugin: plugstack.conf takes config=FILE and nothing else", "[plugin]") {
    svm::PluginOptions o;
    svm::parse_plugin_args({"config=/etc/x.json"}, o);
    CHECK(o.config == "/etc/x.json");
    CHECK(svm::test::reason_of([&] { svm::parse_plugin_args({"debug"}, o); }) ==
          "unknown plugstack.conf argument \"debug\" (known: config=FILE)");
}

TEST_CASE_METHOD(PluginJob, "plugin: a job without --vm-image passes nothing on, VM options alone are refused",
                 "[plugin]") {
    svm::submit_request(host, o, process({"PATH=/bin"}));
    CHECK(host.passed.empty());

    svm::PluginOptions k = o;
    k.kernel = "/boot/vmlinuz";
    CHECK(svm::test::reason_of([&] { svm::submit_request(host, k, process({})); }) ==
          "--vm-kernel, --vm-initrd, --vm-cmdline, --vm-irq-profile, --vm-save and --vm-resume need --vm-image");
    // A profile from the environment is a preference, not a request.
    svm::PluginOptions e = o;
    svm::submit_request(host, e, process({"SLURM_VM_IRQ_PROFILE=latency"}));
    CHECK(host.passed.empty());
    // The option itself is.
    svm::PluginOptions q = o;
    q.irq_profile = "latency";
    CHECK_FALSE(svm::test::reason_of([&] { svm::submit_request(host, q, process({})); }).empty());
}

TEST_CASE_METHOD(PluginJob, "plugin: --vm-image=none is refused where the partition requires a VM", "[plugin]") {
    o.image = "none";
    svm::PluginOptions a = o;
    std::string r = svm::test::reason_of([&] {
        svm::submit_request(host, a, process({}, {"sbatch", "-p", "vmonly"}));
    });
    CHECK(r.find("vmonly") != std::string::npos);
    CHECK(host.passed.empty());
    // The same through the environment and through the cluster's default.
    svm::PluginOptions b = o;
    CHECK_FALSE(
        svm::test::reason_of([&] { svm::submit_request(host, b, process({"SBATCH_PARTITION=vmonly"})); }).empty());
    host.default_part = "vmonly";
    svm::PluginOptions c = o;
    CHECK_FALSE(svm::test::reason_of([&] { svm::submit_request(host, c, process({})); }).empty());
    // Elsewhere it is passed on, so that a partition's default VM is left out.
    host.default_part = "batch";
    svm::PluginOptions ok = o;
    svm::submit_request(host, ok, process({}));
    CHECK(host.passed == std::map<std::string, std::string>{{"SLURM_VM_IMAGE", "none"}});
    svm::PluginOptions extra = o;
    extra.save = "/tmp/x.qcow2";
    CHECK(svm::test::reason_of([&] { svm::submit_request(host, extra, process({})); }).find("other than none") !=
          std::string::npos);
}

TEST_CASE("plugin: the partition asked for: command line, then environment, then the default", "[plugin]") {
    FakeHost host;
    host.default_part = "dflt";
    using V = std::vector<std::string>;
    CHECK(svm::submit_partitions(host, process({"SBATCH_PARTITION=env"}, {"sbatch", "--partition=a,b"})) ==
          V{"a", "b"});
    CHECK(svm::submit_partitions(host, process({"SALLOC_PARTITION=env"})) == V{"env"});
    CHECK(svm::submit_partitions(host, process({})) == V{"dflt"});
}

TEST_CASE_METHOD(PluginJob, "plugin: a missing image is refused at submit with its path made absolute", "[plugin]") {
    o.image = "sub/img.qcow2";
    std::string r = svm::test::reason_of([&] { svm::submit_request(host, o, process({})); });
    CHECK(r.find("/nonexistent-cwd/sub/img.qcow2") != std::string::npos);
    CHECK(host.passed.empty());
}

TEST_CASE("plugin: find_plan picks this node's plan among the %n state directories", "[plugin]") {
    svm::test::TempDir d("svm-plugin");
    FakeHost host;
    std::string cfg = write_config(d.path());
    write_plan(d.path(), "node1", 77, 0);
    write_plan(d.path(), "node2", 77, 1);
    write_plan(d.path(), "node3", 78, 1);
    auto f = svm::find_plan(host, cfg, 77, 1);
    REQUIRE(f);
    CHECK(f->node == "node2");
    CHECK(f->plan.node_index == 1);
    CHECK_FALSE(svm::find_plan(host, cfg, 77, 2));
    CHECK_FALSE(svm::find_plan(host, cfg, 79, 0));
    CHECK(host.errors.empty());
    // An unreadable configuration finds no plan and says why in the log.
    CHECK_FALSE(svm::find_plan(host, d.path() + "/missing.json", 77, 1));
    REQUIRE(host.errors.size() == 1);
    CHECK(host.errors[0].find("missing.json") != std::string::npos);
}

TEST_CASE_METHOD(PluginJob, "plugin: a task of a VM job is wrapped in slurm-vm-exec, the batch step is marked",
                 "[plugin]") {
    svm::JobPlan p = write_plan(d.path(), "node1", 90, 0);
    svm::TaskIds ids{90, 0, 4242, false, true};
    // What would load the user's code into slurm-vm-exec on the host goes.
    for (const char* n : {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "BASH_ENV", "BASH_FUNC_x%%"})
        host.task[n] = "/home/u/evil";
    host.task["HOME"] = "/home/u";
    svm::route_task(host, o, ids);
    for (const char* n : {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "BASH_ENV", "BASH_FUNC_x%%"})
        CHECK(host.task.count(n) == 0);
    CHECK(host.task["HOME"] == "/home/u");
    CHECK(host.wrapped == "/opt/svm/libexec/slurm-vm-exec");
    // What the host side may still execute: the project's, ssh's and the
    // shell's programs, nothing under the user's directories.
    REQUIRE_FALSE(host.exec_allowed.empty());
    CHECK(host.exec_allowed[0] == "/opt/svm/libexec");
    CHECK(std::find(host.exec_allowed.begin(), host.exec_allowed.end(), "/bin/sh") != host.exec_allowed.end());
    for (const auto& a : host.exec_allowed) CHECK(a.rfind("/home", 0) != 0);
    CHECK(host.task["SLURM_VM_PLAN"] == p.plan_file());
    CHECK(host.task["SLURM_VM_BATCH"] == "1");
    // A step (srun in the script) inherits the batch's mark: it is removed.
    ids.batch_step = false;
    svm::route_task(host, o, ids);
    CHECK(host.task.count("SLURM_VM_BATCH") == 0);
    // The extern step is the keeper's: nothing to wrap.
    FakeHost ext;
    ids.extern_step = true;
    svm::route_task(ext, o, ids);
    CHECK(ext.wrapped.empty());
}

TEST_CASE("plugin: a task that asked for a VM never runs on the host without a guest", "[plugin]") {
    svm::test::TempDir d("svm-plugin");
    svm::PluginOptions o;
    o.config = write_config(d.path());
    svm::TaskIds ids{91, 0, 4242, false, false};
    FakeHost plain;  // no VM asked: runs on the host, untouched
    svm::route_task(plain, o, ids);
    CHECK(plain.wrapped.empty());
    CHECK(plain.task.empty());
    FakeHost none;  // --vm-image=none: on the host
    none.image = "none";
    svm::route_task(none, o, ids);
    CHECK(none.wrapped.empty());
    const std::string refusal =
        "job 91: no guest was prepared on this node; the task does not run on the host "
        "(check the node's Prolog and PrologFlags=Alloc,Contain)";
    FakeHost asked;
    asked.image = "/img.qcow2";
    CHECK(svm::test::reason_of([&] { svm::route_task(asked, o, ids); }) == refusal);
    FakeHost part;  // a partition that requires a VM asks for one
    part.task["SLURM_JOB_PARTITION"] = "vmonly";
    CHECK(svm::test::reason_of([&] { svm::route_task(part, o, ids); }) == refusal);
    CHECK(part.wrapped.empty());
}

TEST_CASE("plugin: --vm-console opens the guest's console for its owner and root only", "[plugin]") {
    svm::test::TempDir d("svm-plugin");
    svm::PluginOptions o;
    o.config = write_config(d.path());
    o.console = true;
    svm::JobPlan p = write_plan(d.path(), "node1", 92, 0);
    svm::write_file_atomic(p.console_log(), "login:\n");
    FakeHost stranger;
    stranger.task["SLURM_VM_CONSOLE_FD"] = "5";  // from the environment of the step: never trusted
    CHECK(svm::test::reason_of([&] {
              svm::open_console_for(stranger, o, {92, 0, 5000, false, false});
          }) == "job 92: the console of its guest is for its owner and root only");
    CHECK(stranger.task.count("SLURM_VM_CONSOLE_FD") == 0);
    for (uid_t uid : {uid_t(4242), uid_t(0)}) {
        FakeHost h;
        svm::open_console_for(h, o, {92, 0, uid, false, false});
        REQUIRE(h.task.count("SLURM_VM_CONSOLE_FD") == 1);
        int fd = std::stoi(h.task["SLURM_VM_CONSOLE_FD"]);
        char buf[16] = {};
        CHECK(::read(fd, buf, sizeof buf - 1) == 7);
        CHECK(std::string(buf) == "login:\n");
        ::close(fd);
    }
    FakeHost elsewhere;
    CHECK(svm::test::reason_of([&] {
              svm::open_console_for(elsewhere, o, {92, 1, 4242, false, false});
          }) == "job 92 runs no guest on this node: there is no console to show");
    // Without --vm-console nothing is opened.
    svm::PluginOptions quiet = o;
    quiet.console = false;
    FakeHost h;
    svm::open_console_for(h, quiet, {92, 0, 4242, false, false});
    CHECK(h.task.empty());
}

TEST_CASE("plugin: the extern step starts the keeper detached, logging to the job directory", "[plugin]") {
    svm::test::TempDir d("svm-plugin");
    std::string libexec = d.path() + "/libexec";
    svm::mkdir_p(libexec);
    svm::write_file_atomic(libexec + "/slurm-vm-keeper",
                           "#!/bin/sh\necho \"$*\" >" + d.path() +
                               "/args.tmp\necho started\n"
                               "mv " +
                               d.path() + "/args.tmp " + d.path() + "/args\n",
                           0755);
    std::string cfg = write_config(d.path(), libexec);
    svm::JobPlan p = write_plan(d.path(), "node2", 93, 1);
    FakeHost none;  // not a VM job here: nothing starts
    svm::start_keeper_for(none, cfg, {93, 0, 4242, true, false}, 1234);
    CHECK(none.infos.empty());
    FakeHost host;
    svm::start_keeper_for(host, cfg, {93, 1, 4242, true, false}, 1234);
    std::string args;
    for (int i = 0; i < 500 && !svm::read_file_if_exists(d.path() + "/args", args); ++i) ::usleep(10000);
    CHECK(args == "--config " + cfg + " --node node2 --job 93 --join-cgroup-of 1234\n");
    CHECK(host.infos == std::vector<std::string>{"job 93: keeper started on node2"});
    // Its output goes to keeper.log, which only root reads.
    std::string log;
    for (int i = 0; i < 500 && log.empty(); ++i) {
        svm::read_file_if_exists(p.dir + "/keeper.log", log);
        if (log.empty()) ::usleep(10000);
    }
    CHECK(log == "started\n");
    struct stat st {};
    REQUIRE(::stat((p.dir + "/keeper.log").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
}
