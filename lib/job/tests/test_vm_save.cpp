// --vm-save (vm_save.hpp): the path's syntax, the submit-time check, and the
// save itself: the overlay with its base written as a standalone image by the
// user (nobody here), never by root; the base is only read.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "catch.hpp"

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "image_check.hpp"
#include "job_plan.hpp"
#include "proc.hpp"
#include "support.hpp"
#include "vm_save.hpp"

namespace {
using svm::test::reason_of;
constexpr uid_t kNobody = 65534;

std::string sha_of(const std::string& path) {
    return svm::run_checked({"/bin/sh", "-c", "sha256sum < " + svm::shell_quote(path)});
}
}  // namespace

TEST_CASE("vm save: the path's syntax", "[save]") {
    CHECK_NOTHROW(svm::check_save_path("/home/u/images/next.qcow2"));
    CHECK(reason_of([] { svm::check_save_path("rel.qcow2"); }).find("absolute path") != std::string::npos);
    CHECK(reason_of([] { svm::check_save_path("/home/u/dir/"); }).find("names a directory") != std::string::npos);
    CHECK(reason_of([] { svm::check_save_path("/home/u/../x"); }).find("no \".\" or \"..\"") != std::string::npos);
    CHECK(reason_of([] { svm::check_save_path("/home/u/a\nb"); }).find("single line") != std::string::npos);
    CHECK(reason_of([] { svm::check_save_path("/" + std::string(1100, 'a')); }).find("1023") != std::string::npos);
    CHECK(svm::save_temp_path("/home/u/next.qcow2", 42) == "/home/u/.next.qcow2.slurm-vm-save.42");
}

TEST_CASE("vm save: the bound within Slurm's epilog time", "[save]") {
    CHECK(svm::save_bound_s(300, 0) == 300);      // Slurm's time unknown
    CHECK(svm::save_bound_s(300, 65534) == 300);  // Slurm's "no limit"
    CHECK(svm::save_bound_s(300, 600) == 300);
    CHECK(svm::save_bound_s(1800, 600) == 480);  // all of it but two minutes
    CHECK(svm::save_bound_s(1800, 100) == 50);   // half of it
    CHECK(svm::save_bound_s(3, 600) == 3);
    CHECK(svm::save_bound_s(0, 1) == 1);
}

TEST_CASE("vm save: qemu-img reads the image through a descriptor", "[save]") {
    CHECK(svm::save_image_opts("/o/job_7/overlay.qcow2", "raw", 3) ==
          "driver=qcow2,file.driver=file,file.filename=/o/job_7/overlay.qcow2,backing.driver=raw,"
          "backing.file.driver=file,backing.file.filename=/dev/fd/3");
    CHECK(svm::save_image_opts("/o,x/overlay.qcow2", "qcow2", 3).find("file.filename=/o,,x/overlay.qcow2,") !=
          std::string::npos);
}

TEST_CASE("vm save: checked at submit as the caller", "[save]") {
    svm::test::TempDir d_dir("svm-save");
    std::string d = d_dir.path();
    ::chmod(d.c_str(), 0755);
    CHECK_NOTHROW(svm::check_save_path_as_self(d + "/new.qcow2"));
    CHECK(reason_of([&] { svm::check_save_path_as_self(d + "/missing/new.qcow2"); }).find("does not exist") !=
          std::string::npos);
    ::mkdir((d + "/sub").c_str(), 0755);
    CHECK(reason_of([&] { svm::check_save_path_as_self(d + "/sub"); }).find("is not a regular file") !=
          std::string::npos);
    if (::geteuid() == 0) {
        // As nobody: a root-owned 0755 directory is not the caller's to write.
        svm::Credentials nobody = svm::credentials_for(kNobody);
        auto r = svm::run_function_as(nobody, [&](int fd) {
            std::string s = reason_of([&] { svm::check_save_path_as_self(d + "/sub/new.qcow2"); });
            (void)!::write(fd, s.data(), s.size());
            return 0;
        });
        INFO(r.out);
        CHECK(r.out.find("you cannot create files in " + d + "/sub") != std::string::npos);
    }
}

TEST_CASE("vm save: overlay and base become the user's standalone image", "[save]") {
    if (::geteuid() != 0) FAIL("needs root (the save runs as another user)");
    svm::test::TempDir d_dir("svm-save");
    std::string d = d_dir.path();
    ::chmod(d.c_str(), 0755);
    // The user's image (nobody's, read-only to them) and the job's overlay
    // (root's, 0600: the user reaches it only through the save's ACL entry).
    std::string base = d + "/base.raw", out_dir = d + "/out", overlay_dir = d + "/overlays";
    svm::run_checked({"qemu-img", "create", "-q", "-f", "raw", base, "8M"});
    svm::run_checked({"qemu-io", "-f", "raw", "-c", "write -P 0x11 0 1M", base});
    ::chown(base.c_str(), kNobody, kNobody);
    ::chmod(base.c_str(), 0400);
    std::string base_sha = sha_of(base);
    ::mkdir(overlay_dir.c_str(), 0700);
    svm::JobPlan p;
    p.job_id = 7;
    p.uid = kNobody;
    p.gid = kNobody;
    p.user = "nobody";
    p.node = "n1";
    p.dir = d + "/job";
    p.overlay_dir = overlay_dir;
    p.domain_name = "slurm-vm-7-n1";
    ::mkdir(p.dir.c_str(), 0700);
    svm::run_checked({"qemu-img", "create", "-q", "-f", "qcow2", "-u", "-F", "raw", "-b", base, p.overlay(), "8M"});
    svm::run_checked({"qemu-io", "-f", "qcow2", "-c", "write -P 0x22 4M 1M", p.overlay()});
    ::chmod(p.overlay().c_str(), 0600);
    p.image = base;
    p.image_format = "raw";
    struct stat bst {};
    REQUIRE(::stat(base.c_str(), &bst) == 0);
    p.image_identity = svm::identity_of(bst);
    auto temps_in = [](const std::string& dir) {
        int n = 0;
        for (const auto& f : svm::list_dir(dir)) n += f.find(".slurm-vm-save.") != std::string::npos;
        return n;
    };

    SECTION("written as the user, no backing file, the guest's data and the base's") {
        ::mkdir(out_dir.c_str(), 0755);
        ::chown(out_dir.c_str(), kNobody, kNobody);
        p.save_path = out_dir + "/next.qcow2";
        svm::save_guest_disk(p, "/usr/bin/qemu-img");
        struct stat st {};
        REQUIRE(::stat(p.save_path.c_str(), &st) == 0);
        CHECK(st.st_uid == kNobody);
        std::string info = svm::run_checked({"qemu-img", "info", "-U", "--output=json", p.save_path});
        CHECK(info.find("\"format\": \"qcow2\"") != std::string::npos);
        CHECK(info.find("backing") == std::string::npos);
        CHECK(svm::run({"qemu-io", "-f", "qcow2", "-c", "read -P 0x11 0 1M", p.save_path})
                  .out.find("Pattern verification failed") == std::string::npos);
        CHECK(svm::run({"qemu-io", "-f", "qcow2", "-c", "read -P 0x22 4M 1M", p.save_path})
                  .out.find("Pattern verification failed") == std::string::npos);
        CHECK(sha_of(base) == base_sha);  // the user's image is only read
        CHECK(temps_in(out_dir) == 0);
        // An existing file is replaced.
        svm::save_guest_disk(p, "/usr/bin/qemu-img");
        CHECK(svm::path_exists(p.save_path));
    }
    SECTION("a directory the user cannot write: one sentence, nothing written") {
        ::mkdir(out_dir.c_str(), 0755);  // root's
        p.save_path = out_dir + "/next.qcow2";
        std::string why = reason_of([&] { svm::save_guest_disk(p, "/usr/bin/qemu-img"); });
        INFO(why);
        CHECK(why.find("--vm-save=" + p.save_path + ": the guest's disk could not be written as nobody") == 0);
        CHECK(!svm::path_exists(p.save_path));
        CHECK(svm::list_dir(out_dir).empty());
        // The user learns why in the job's directory, written as the user.
        std::string wdir = d + "/work";
        ::mkdir(wdir.c_str(), 0755);
        ::chown(wdir.c_str(), kNobody, kNobody);
        p.workdir = wdir;
        CHECK(svm::save_note_path(p) == wdir + "/slurm-7.vm-save.txt");
        REQUIRE(svm::write_save_note(p, why));
        struct stat st {};
        REQUIRE(::stat(svm::save_note_path(p).c_str(), &st) == 0);
        CHECK(st.st_uid == kNobody);
        CHECK(svm::read_file(svm::save_note_path(p)) == "slurm-vm: job 7: " + why + "\n");
        p.workdir = out_dir;  // root's: not the user's to write
        CHECK_FALSE(svm::write_save_note(p, why));
        CHECK(!svm::path_exists(out_dir + "/slurm-7.vm-save.txt"));
    }
    SECTION("the image replaced by a FIFO: the save fails at once, nothing written") {
        ::mkdir(out_dir.c_str(), 0755);
        ::chown(out_dir.c_str(), kNobody, kNobody);
        p.save_path = out_dir + "/next.qcow2";
        REQUIRE(::rename(base.c_str(), (d + "/moved").c_str()) == 0);
        REQUIRE(::mkfifo(base.c_str(), 0666) == 0);
        long t0 = svm::now_ms();
        std::string why = reason_of([&] { svm::save_guest_disk(p, "/usr/bin/qemu-img", 20); });
        INFO(why);
        CHECK(svm::now_ms() - t0 < 5000);
        CHECK(why == "--vm-save=" + p.save_path + ": nothing was saved: " + base + " is a FIFO, not a regular file");
        CHECK(svm::list_dir(out_dir).empty());
        // Another file at the path (the same bytes): not the file checked.
        ::unlink(base.c_str());
        svm::run_checked({"cp", "-p", d + "/moved", base});
        why = reason_of([&] { svm::save_guest_disk(p, "/usr/bin/qemu-img", 20); });
        INFO(why);
        CHECK(why.find("changed since the job started") != std::string::npos);
        CHECK(svm::list_dir(out_dir).empty());
    }
    SECTION("a save slower than its bound: qemu-img's process group killed, nothing left") {
        ::mkdir(out_dir.c_str(), 0775);
        ::chown(out_dir.c_str(), kNobody, kNobody);
        p.save_path = out_dir + "/next.qcow2";
        // Another member of a shared directory made the temporary file's
        // old, fixed name first: it is neither used nor touched.
        std::string planted = svm::save_temp_path(p.save_path, 7);
        svm::write_new_file(planted, "theirs", 0666);
        std::string slow = d + "/slow-qemu-img", marker = d + "/slow.pids";
        svm::write_new_file(slow, "#!/bin/sh\nsleep 60 &\necho $! >" + marker + "\nsleep 60\n", 0755);
        ::chmod(d.c_str(), 0777);
        long t0 = svm::now_ms();
        std::string why = reason_of([&] { svm::save_guest_disk(p, slow, 2); });
        INFO(why);
        CHECK(svm::now_ms() - t0 < 8000);
        CHECK(why == "--vm-save=" + p.save_path +
                         ": the guest's disk could not be written as nobody (it took longer than the 2 s a save "
                         "may take on this node)");
        std::string pid = svm::trim(svm::read_file(marker));
        ::usleep(200000);
        auto child = svm::proc_stat(static_cast<pid_t>(std::stol(pid)));
        CHECK((!child || child->state == 'Z'));  // the script's own child too
        CHECK(svm::list_dir(out_dir) == std::vector<std::string>{".next.qcow2.slurm-vm-save.7"});
        CHECK(svm::read_file(planted) == "theirs");
        ::chmod(d.c_str(), 0755);
    }
    SECTION("the temporary file is new and the user's alone") {
        ::mkdir(out_dir.c_str(), 0755);
        ::chmod(out_dir.c_str(), 0777);  // anyone's: the file is made new all the same
        p.save_path = out_dir + "/next.qcow2";
        std::string seen = d + "/seen";
        // A qemu-img that shows what it writes into.
        std::string spy = d + "/spy-qemu-img";
        svm::write_new_file(spy, "#!/bin/sh\nstat -L -c '%u %a %s' /dev/fd/4 >" + seen + "\nexit 3\n", 0755);
        ::chmod(d.c_str(), 0777);
        std::string why = reason_of([&] { svm::save_guest_disk(p, spy, 20); });
        INFO(why);
        CHECK(why.find("qemu-img exited with status 3") != std::string::npos);
        CHECK(svm::trim(svm::read_file(seen)) == "65534 600 0");
        CHECK(temps_in(out_dir) == 0);
        ::chmod(d.c_str(), 0755);
    }
}
