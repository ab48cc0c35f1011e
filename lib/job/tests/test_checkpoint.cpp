// Resumable jobs (lib/job/checkpoint.hpp): which jobs can be saved, the
// checkpoint's entries, and which checkpoint a run may restore.
#include "catch.hpp"

#include "checkpoint.hpp"
#include "config.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "plugin.hpp"
#include "support.hpp"

namespace {

svm::CheckpointEntry entry(int i, int nodes) {
    svm::CheckpointEntry e;
    e.job_id = 42;
    e.uid = 2001;
    e.node_index = i;
    e.nodes = nodes;
    e.guest_node = "node" + std::to_string(i + 1);
    e.image.dev = 1;
    e.image.ino = 2;
    e.image.size = 3;
    return e;
}

void write_entry(const std::string& dir, const svm::CheckpointEntry& e) {
    svm::write_file_atomic(svm::checkpoint_file(dir, e.node_index, "json"), e.to_json(), 0600);
    svm::write_file_atomic(svm::checkpoint_file(dir, e.node_index, "save"), "state", 0600);
    svm::write_file_atomic(svm::checkpoint_file(dir, e.node_index, "qcow2"), "disk", 0600);
}

}  // namespace

TEST_CASE("checkpoint: the job's --vm-resume, its partition's or the site's", "[checkpoint]") {
    svm::CheckpointConfig cp;
    cp.partitions["preempt"] = "auto";
    CHECK(cp.resume_of("", "debug") == "never");
    CHECK(cp.resume_of("", "preempt") == "auto");
    CHECK(cp.resume_of("never", "preempt") == "never");
    cp.resume = "auto";
    CHECK(cp.resume_of("", "debug") == "auto");
}

TEST_CASE("checkpoint: what cannot be saved is said", "[checkpoint]") {
    svm::CheckpointConfig cp;
    svm::JobPlan p;
    p.node = "node1";
    CHECK(svm::not_resumable_because(cp, p).find("no checkpoint.dir") != std::string::npos);
    cp.dir = "/ckpt";
    CHECK(svm::not_resumable_because(cp, p).empty());
    p.shares = {"/home/u"};
    CHECK(svm::not_resumable_because(cp, p).find("/home/u") != std::string::npos);
    p.shares.clear();
    p.hostdevs.resize(1);
    CHECK(svm::not_resumable_because(cp, p).find("devices passed through") != std::string::npos);
}

TEST_CASE("checkpoint: restored only when whole and the job's own", "[checkpoint]") {
    svm::test::TempDir d("svm-ckpt");
    std::string dir = svm::checkpoint_job_dir(d.path(), 42), why;
    CHECK(dir == d.path() + "/job_42");
    CHECK(!svm::whole_checkpoint(dir, 42, 2001, 2, why));
    CHECK(why.empty());  // none at all
    svm::mkdir_p(dir, 0700);
    write_entry(dir, entry(0, 2));
    CHECK(!svm::whole_checkpoint(dir, 42, 2001, 2, why));
    CHECK(why.find("not saved whole") != std::string::npos);
    // The reason the other node's epilog left is the user's to read.
    svm::write_file_atomic(svm::checkpoint_file(dir, 1, "failed"), "its guest on node2 needs 3000 MiB\n", 0600);
    CHECK(!svm::whole_checkpoint(dir, 42, 2001, 2, why));
    CHECK(why.find("(its guest on node2 needs 3000 MiB)") != std::string::npos);
    write_entry(dir, entry(1, 2));
    auto whole = svm::whole_checkpoint(dir, 42, 2001, 2, why);
    REQUIRE(whole);
    CHECK((*whole)[1].guest_node == "node2");
    CHECK((*whole)[0].image == entry(0, 2).image);
    // Another user's, another node count, another job's entry: refused.
    CHECK(!svm::whole_checkpoint(dir, 42, 2002, 2, why));
    CHECK(why.find("another job, user") != std::string::npos);
    CHECK(!svm::whole_checkpoint(dir, 42, 2001, 3, why));
    svm::CheckpointEntry foreign = entry(1, 2);
    foreign.job_id = 41;
    write_entry(dir, foreign);
    CHECK(!svm::whole_checkpoint(dir, 42, 2001, 2, why));
    // An entry whose files are gone, or that is not ours: refused.
    write_entry(dir, entry(1, 2));
    ::unlink(svm::checkpoint_file(dir, 1, "save").c_str());
    CHECK(!svm::whole_checkpoint(dir, 42, 2001, 2, why));
    CHECK(why.find("missing") != std::string::npos);
    write_entry(dir, entry(1, 2));
    svm::write_file_atomic(svm::checkpoint_file(dir, 1, "json"), R"({"job_id":42,"extra":1})", 0600);
    CHECK(!svm::whole_checkpoint(dir, 42, 2001, 2, why));
    svm::remove_checkpoint(dir);
    CHECK(!svm::path_exists(dir));
}

TEST_CASE("checkpoint: sbatch says whether the job is resumable, and why not", "[checkpoint]") {
    svm::NodeConfig cfg;
    svm::SubmitProcess proc;
    proc.args = {"sbatch", "-N2", "job.sh"};
    CHECK(svm::resumable_at_submit(cfg, "", "debug", proc).empty());  // not asked, no default
    CHECK(svm::resumable_at_submit(cfg, "auto", "debug", proc).find("no checkpoint.dir") != std::string::npos);
    cfg.checkpoint.dir = "/ckpt";
    cfg.shares_via = "9p";  // whatever this host's QEMU
    CHECK(svm::resumable_at_submit(cfg, "auto", "debug", proc).find("not resumable: its guest has host directories") !=
          std::string::npos);
    cfg.shares.clear();
    CHECK(svm::resumable_at_submit(cfg, "auto", "debug", proc).find("the job is resumable") != std::string::npos);
    cfg.checkpoint.partitions["preempt"] = "auto";
    CHECK(svm::resumable_at_submit(cfg, "", "preempt", proc).find("the job is resumable") != std::string::npos);
    CHECK(svm::resumable_at_submit(cfg, "never", "preempt", proc).empty());
    proc.args = {"sbatch", "--gres=gpu:2", "job.sh"};
    CHECK(svm::resumable_at_submit(cfg, "auto", "debug", proc).find("devices passed through") != std::string::npos);
    proc.args = {"sbatch", "job.sh"};
    proc.env = {"SBATCH_GPUS=1"};
    CHECK(svm::resumable_at_submit(cfg, "auto", "debug", proc).find("devices passed through") != std::string::npos);
}

TEST_CASE("checkpoint: shares move with the guest over virtio-fs from QEMU 8.2, never over 9p", "[checkpoint]") {
    svm::test::TempDir d("svm-ckpt-qemu");
    auto emulator = [&](const std::string& says) {
        std::string path = d.path() + "/qemu-" + std::to_string(std::hash<std::string>()(says));
        svm::write_file_atomic(path, "#!/bin/sh\necho '" + says + "'\n", 0755);
        return path;
    };
    svm::CheckpointConfig cp;
    cp.dir = "/ckpt";
    svm::JobPlan p;
    p.shares = {"/home/u", "/work/u"};
    p.shares_via = "9p";
    CHECK(svm::not_resumable_because(cp, p).find("over 9p, which QEMU cannot save") != std::string::npos);
    p.shares_via = "virtiofs";
    p.emulator = emulator("QEMU emulator version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u18)");
    CHECK(svm::not_resumable_because(cp, p).find("QEMU 7.2 cannot save (QEMU 8.2 and later can)") != std::string::npos);
    p.emulator = emulator("QEMU emulator version 11.1.2 (Debian 1:11.1.2+ds-3)");
    CHECK(svm::not_resumable_because(cp, p).empty());
    p.emulator = emulator("QEMU emulator version 8.2.0");
    CHECK(svm::not_resumable_because(cp, p).empty());
    p.emulator = emulator("something else");
    CHECK(svm::not_resumable_because(cp, p).find("does not tell its version") != std::string::npos);
    p.emulator.clear();  // sbatch without QEMU: the nodes tell
    CHECK(svm::not_resumable_because(cp, p).empty());
}
