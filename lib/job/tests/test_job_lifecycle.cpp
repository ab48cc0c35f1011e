// A job's preparation and teardown on one node (prepare_job, teardown_job)
// against the real qemu-img and genisoimage, a stand-in /dev/kvm and a
// state directory of the test's own: prepared and torn down; a step failing
// after each record of the ledger (the prolog's one rollback point undoes
// it); the prolog dying after each record (no rollback: the epilog then
// undoes it); and the epilog run twice. Each time nothing of the job is left.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"

#include "cgroup.hpp"
#include "config.hpp"
#include "dev_acl.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "ledger.hpp"
#include "proc.hpp"
#include "support.hpp"
#include "vm_job.hpp"

namespace {

constexpr uint32_t kJob = 4242;
constexpr uid_t kUser = 65534;  // nobody: the image is read with its rights only

struct Node {
    svm::test::TempDir tmp{"svm-lifecycle"};
    svm::NodeConfig cfg;
    svm::JobRequest req;

    Node() {
        const std::string& r = tmp.path();
        cfg.node_name = "n1";
        cfg.state_dir = svm::path_join(r, "state");
        cfg.overlay_dir = svm::path_join(r, "overlays");
        cfg.log_dir = svm::path_join(r, "log");
        cfg.kvm_device = svm::path_join(r, "kvm");
        cfg.secret_file = svm::path_join(r, "secret");
        cfg.domain_type = "qemu";
        cfg.hugepages = "off";
        cfg.shares.clear();  // nobody's home is /nonexistent
        svm::write_file_atomic(cfg.kvm_device, "", 0600);
        svm::write_file_atomic(cfg.secret_file, std::string(48, 's'), 0600);
        // A capabilities cache as the node's first job leaves it: no probe of QEMU here.
        std::string caps = svm::path_join(cfg.state_dir, "libvirt-caps/cache/qemu/capabilities");
        svm::mkdir_p(caps, 0700);
        svm::write_file_atomic(svm::path_join(caps, "test.xml"), "<qemuCaps/>\n", 0644);
        std::string img_dir = svm::path_join(r, "images");
        svm::mkdir_p(img_dir, 0755);
        req.image = svm::path_join(img_dir, "disk.qcow2");
        svm::run_checked({cfg.qemu_img, "create", "-q", "-f", "qcow2", req.image, "16M"});
        REQUIRE(::chmod(req.image.c_str(), 0644) == 0);
        req.job_id = kJob;
        req.uid = kUser;
        req.gid = svm::credentials_for(kUser).gid;
        req.node = "n1";
        req.nodelist = "n1";
        req.workdir = "/";
    }

    // What of the job is on the node, in words; "" when nothing.
    std::string leftovers() const {
        std::string out;
        if (svm::path_exists(cfg.job_dir(kJob))) out += " job directory";
        if (svm::path_exists(cfg.job_overlay_dir(kJob))) out += " overlay directory";
        if (svm::path_exists(cfg.ledger_path(kJob))) out += " ledger";
        if (svm::has_group_entry(cfg.kvm_device, cfg.job_gid(kJob))) out += " kvm ACL entry";
        return out;
    }
};

struct HookReset {
    ~HookReset() { svm::Ledger::set_record_hook_for_tests(nullptr); }
};

// While it lives, the ledger's nth record from now (1: the first) calls
// act, which throws: a step failing, or the prolog dying, right there.
class AtRecord {
public:
    AtRecord(size_t n, std::function<void(const svm::LedgerEntry&)> act) {
        svm::Ledger::set_record_hook_for_tests(
            [n, act = std::move(act), seen = size_t{0}](const svm::LedgerEntry& e) mutable {
                if (++seen == n) act(e);
            });
    }

private:
    HookReset reset_;
};

// Not an svm::Error: past the prolog's rollback point, like the process ending there.
void die(const svm::LedgerEntry&) { throw std::runtime_error("the prolog died"); }

// The kinds a full preparation records, in order.
std::vector<std::string> recorded_kinds(Node& n) {
    std::vector<std::string> kinds;
    HookReset reset;
    svm::Ledger::set_record_hook_for_tests([&](const svm::LedgerEntry& e) { kinds.push_back(e.kind); });
    svm::PrologResult r = svm::prepare_job(n.cfg, n.req);
    INFO(r.reason);
    REQUIRE(r.status == svm::PrologStatus::prepared);
    return kinds;
}

}  // namespace

TEST_CASE("job lifecycle: prepared, then torn down to nothing, a second epilog changes nothing", "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    std::vector<std::string> kinds = recorded_kinds(n);
    CHECK(kinds == std::vector<std::string>{"job_cgroups", "job_dir", "dev_acl", "overlay_dir", "domain"});
    svm::JobPlan p = svm::JobPlan::from_json(svm::read_file(svm::path_join(n.cfg.job_dir(kJob), "plan.json")), "plan");
    CHECK(p.image == n.req.image);
    CHECK(svm::path_exists(p.overlay()));
    CHECK(svm::path_exists(p.seed()));
    CHECK(svm::has_group_entry(n.cfg.kvm_device, n.cfg.job_gid(kJob)));

    CHECK(svm::teardown_job(n.cfg, kJob).empty());
    CHECK(n.leftovers() == "");
    CHECK(svm::teardown_job(n.cfg, kJob).empty());  // the epilog again, or sweep after it
    CHECK(n.leftovers() == "");
    CHECK(svm::path_exists(n.req.image));  // the user's image is never touched
}

TEST_CASE("job lifecycle: a refused job leaves its directory and cgroups to the epilog, which undoes them",
          "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    REQUIRE(::chmod(n.req.image.c_str(), 0600) == 0);  // root's alone: the user cannot read it
    std::vector<std::string> kinds;
    {
        HookReset reset;
        svm::Ledger::set_record_hook_for_tests([&](const svm::LedgerEntry& e) { kinds.push_back(e.kind); });
        svm::PrologResult r = svm::prepare_job(n.cfg, n.req);
        CHECK(r.status == svm::PrologStatus::refused);
        CHECK(r.reason.find(n.req.image) != std::string::npos);
    }
    // The prolog's rollback, then what the epilog is left: the job's cgroups
    // (Slurm may leave them behind) and the directory with the reason.
    svm::Ledger left = svm::Ledger::load(n.cfg.ledger_path(kJob), kJob);
    std::vector<std::string> left_kinds;
    for (const auto& e : left.entries()) left_kinds.push_back(e.kind);
    CHECK(left_kinds == std::vector<std::string>{"job_cgroups", "job_dir"});
    CHECK(svm::read_file(svm::path_join(n.cfg.job_dir(kJob), "state")).find(n.req.image) != std::string::npos);
    // Recorded while preparing (then rolled back), and again for the epilog.
    CHECK(kinds == std::vector<std::string>{"job_cgroups", "job_dir", "job_cgroups", "job_dir"});
    CHECK(svm::teardown_job(n.cfg, kJob).empty());
    CHECK(n.leftovers() == "");
}

TEST_CASE("job lifecycle: a job whose guest group is a group of the site fails, the node stays up", "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    // The base puts this job's group on the name service's "nogroup" (or
    // "nobody"): a site whose groups (SSSD's id-mapped ones) meet the range.
    gid_t taken = svm::credentials_for(kUser).gid;
    auto name = svm::group_of_gid(taken);
    REQUIRE(name.has_value());
    n.cfg.job_gid_base = taken - kJob;
    svm::PrologResult r = svm::prepare_job(n.cfg, n.req);
    CHECK(r.status == svm::PrologStatus::refused);  // the job's failure, not the node's (no throw)
    CHECK(r.reason.find("guest group, gid " + std::to_string(taken)) != std::string::npos);
    CHECK(r.reason.find("\"" + *name + "\"") != std::string::npos);
    CHECK(r.reason.find('\n') == std::string::npos);
    CHECK_FALSE(svm::has_group_entry(n.cfg.kvm_device, taken));
    CHECK(svm::teardown_job(n.cfg, kJob).empty());
    CHECK(n.leftovers() == "");
    // A free group: prepared.
    n.cfg.job_gid_base = 0x70000000u;
    CHECK(svm::prepare_job(n.cfg, n.req).status == svm::PrologStatus::prepared);
    CHECK(svm::teardown_job(n.cfg, kJob).empty());
}

TEST_CASE("job lifecycle: a step failing after any record is rolled back by the prolog itself", "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    size_t total = recorded_kinds(n).size();
    REQUIRE(svm::teardown_job(n.cfg, kJob).empty());
    for (size_t fail_at = 1; fail_at <= total; ++fail_at) {
        CAPTURE(fail_at);
        AtRecord fail(fail_at,
                      [](const svm::LedgerEntry& e) { SVM_THROW("injected failure after recording " + e.kind); });
        std::string err = svm::test::error_of([&] { svm::prepare_job(n.cfg, n.req); });
        CHECK(err.find("injected failure") != std::string::npos);  // the node's fault: it drains
        CHECK(n.leftovers() == "");
    }
}

TEST_CASE("job lifecycle: a prolog dying after any record leaves what the epilog undoes", "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    size_t total = recorded_kinds(n).size();
    REQUIRE(svm::teardown_job(n.cfg, kJob).empty());
    for (size_t die_at = 1; die_at <= total; ++die_at) {
        CAPTURE(die_at);
        {
            AtRecord crash(die_at, die);
            CHECK_THROWS_AS(svm::prepare_job(n.cfg, n.req), std::runtime_error);
        }
        CHECK(svm::path_exists(n.cfg.ledger_path(kJob)));  // what it did is on record
        CHECK(svm::teardown_job(n.cfg, kJob).empty());
        CHECK(n.leftovers() == "");
        CHECK(svm::teardown_job(n.cfg, kJob).empty());
    }
}

TEST_CASE("job lifecycle: a prolog run again for the same job (requeue) first undoes what the last one left",
          "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    {
        AtRecord crash(3, die);
        CHECK_THROWS_AS(svm::prepare_job(n.cfg, n.req), std::runtime_error);
    }
    CHECK(n.leftovers() != "");
    CHECK(recorded_kinds(n).size() == 5);  // a clean run on top of the leftovers
    CHECK(svm::teardown_job(n.cfg, kJob).empty());
    CHECK(n.leftovers() == "");
}

TEST_CASE("job lifecycle: the epilog of a plain job removes the empty cgroups Slurm left of it", "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    // Where slurmstepd puts a job's cgroups on this host: v1, a hierarchy's
    // slurm_<node>/uid_<uid>; v2, the node's slurmstepd scope. A name of the
    // test's own, removed at the end; real cgroups (mkdir in cgroupfs).
    const bool v2 = svm::cgroup_unified();
    const std::string top = svm::path_join(svm::kCgroupRoot, v2 ? "n1_slurmstepd.scope" : "freezer/slurm_n1");
    const std::string parent = v2 ? top : svm::path_join(top, "uid_65534");
    const std::string job = svm::path_join(parent, "job_" + std::to_string(kJob));
    const std::string other = svm::path_join(parent, "job_" + std::to_string(kJob + 1));
    REQUIRE_FALSE(svm::path_exists(top));
    svm::mkdir_p(svm::path_join(job, "step_extern"));
    svm::mkdir_p(svm::path_join(job, "step_batch"));
    svm::mkdir_p(other);                                       // another job's: stays
    REQUIRE_FALSE(svm::path_exists(n.cfg.ledger_path(kJob)));  // no --vm-image: no ledger

    CHECK(svm::teardown_job(n.cfg, kJob).empty());
    CHECK_FALSE(svm::path_exists(job));
    CHECK(svm::path_exists(other));
    CHECK(n.leftovers() == "");
    for (const auto& d :
         {svm::path_join(job, "step_extern"), svm::path_join(job, "step_batch"), job, other, parent, top})
        ::rmdir(d.c_str());  // deepest first; what is gone already fails harmlessly
}

TEST_CASE("job lifecycle: the overlay is qemu-img's, copied from the node's one for the image after the first job",
          "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    auto prepare = [&] {
        svm::PrologResult r = svm::prepare_job(n.cfg, n.req);
        INFO(r.reason);
        REQUIRE(r.status == svm::PrologStatus::prepared);
        svm::JobPlan p =
            svm::JobPlan::from_json(svm::read_file(svm::path_join(n.cfg.job_dir(kJob), "plan.json")), "plan");
        std::string bytes = svm::read_file(p.overlay());
        struct stat st;
        REQUIRE(::stat(p.overlay().c_str(), &st) == 0);
        CHECK((st.st_mode & 0777) == 0660);
        CHECK(st.st_uid == 0);
        CHECK(st.st_gid == n.cfg.job_gid(kJob));
        CHECK(svm::teardown_job(n.cfg, kJob).empty());
        return bytes;
    };
    std::string by_hand = svm::path_join(n.tmp.path(), "by-hand.qcow2");
    svm::run_checked({n.cfg.qemu_img, "create", "-q", "-f", "qcow2", "-u", "-F", "qcow2", "-b", n.req.image, by_hand,
                      std::to_string(16 << 20)});
    const std::string want = svm::read_file(by_hand);
    const std::string dir = svm::path_join(n.cfg.state_dir, "overlays");
    CHECK(prepare() == want);
    auto kept = svm::list_dir(dir);
    REQUIRE(kept.size() == 1);
    struct stat st;
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    // The next job's overlay comes from the node's copy (planted here), not from qemu-img.
    const std::string name = kept[0], tmpl = svm::path_join(dir, name);
    svm::write_file_atomic(tmpl, "planted", 0644);
    CHECK(prepare() == "planted");
    // Gone (pruned, or removed by an admin): made again.
    ::unlink(tmpl.c_str());
    CHECK(prepare() == want);
    // The node keeps the 64 most recently used; this job's is among them.
    for (int i = 0; i < 70; ++i) {
        std::string old = svm::path_join(dir, "old" + std::to_string(i));
        svm::write_file_atomic(old, "x", 0644);
        struct timespec t[2] = {{1000 + i, 0}, {1000 + i, 0}};
        REQUIRE(::utimensat(AT_FDCWD, old.c_str(), t, 0) == 0);
    }
    ::unlink(tmpl.c_str());
    CHECK(prepare() == want);
    kept = svm::list_dir(dir);
    CHECK(kept.size() == 64);
    CHECK(std::find(kept.begin(), kept.end(), name) != kept.end());
    CHECK(std::find(kept.begin(), kept.end(), "old0") == kept.end());
}

TEST_CASE("job lifecycle: after a power loss emptied state_dir the overlay on disk is found by name", "[lifecycle]") {
    REQUIRE(geteuid() == 0);
    Node n;
    recorded_kinds(n);
    REQUIRE(svm::path_exists(n.cfg.job_overlay_dir(kJob)));
    // The node's tmpfs is gone with the power: ledgers and job directories.
    svm::remove_tree(n.cfg.state_dir);
    CHECK(svm::jobs_on_node(n.cfg) == std::vector<uint32_t>{kJob});  // by the overlay's name alone
    CHECK(svm::teardown_job(n.cfg, kJob).empty());
    CHECK(!svm::path_exists(n.cfg.job_overlay_dir(kJob)));
    CHECK(svm::jobs_on_node(n.cfg).empty());
    // Another entry of overlay_dir is no job's and stays.
    svm::mkdir_p(svm::path_join(n.cfg.overlay_dir, "job_x"), 0700);
    CHECK(svm::jobs_on_node(n.cfg).empty());
    CHECK(svm::teardown_job(n.cfg, kJob).empty());
    CHECK(svm::path_exists(svm::path_join(n.cfg.overlay_dir, "job_x")));
}
