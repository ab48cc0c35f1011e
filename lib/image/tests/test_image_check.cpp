// Image intake: header inspection, the policy, the user-side open and the
// verdict for every image of the hostile corpus (image_corpus.cpp). Needs root.
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include "catch.hpp"

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "image_check.hpp"
#include "image_corpus.hpp"
#include "image_format.hpp"
#include "proc.hpp"
#include "sha256.hpp"
#include "support.hpp"

using svm::test::ImageCorpus;

namespace {
using svm::test::reason_of;

svm::ImagePolicy test_policy() {
    svm::ImagePolicy p;
    p.max_virtual_size = uint64_t(512) << 30;
    return p;
}

const svm::Credentials& nobody() {
    static svm::Credentials c = svm::credentials_for(65534);
    return c;
}

long now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

// check_image_fd as the current user, on an fd the test opens itself; a path that
// cannot be opened (a socket) goes through open_image_as_self.
std::string verdict_self(const std::string& path, const svm::ImagePolicy& policy) {
    svm::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) return reason_of([&] { svm::open_image_as_self(path, policy); });
    return reason_of([&] { svm::check_image_fd(fd.get(), path, policy); });
}

std::string verdict_nobody(const std::string& path, const svm::ImagePolicy& policy) {
    return reason_of([&] { svm::open_image_as_user(path, nobody(), policy); });
}

struct Case {
    const char* name;
    const char* self;    // expected substring as the current user (root); "" = accepted
    const char* nobody;  // expected substring as nobody; nullptr = same as self
};

const char* kFlatten = "; flatten it with 'qemu-img convert -O qcow2 IN OUT'";
const char* kUnreadable = "is not readable by user nobody (Permission denied)";

const std::vector<Case>& cases() {
    static const std::vector<Case> c = {
        {"good.qcow2", "", nullptr},
        {"good-v2.qcow2", "", nullptr},
        {"good-zstd-l2.qcow2", "", nullptr},
        {"dirty.qcow2", "", nullptr},
        {"good.raw", "", nullptr},
        {"odd.raw", "is not a disk image (a raw image is a whole number of 512-byte sectors, this file has 1000 bytes)",
         nullptr},
        {"datafile.data", "", nullptr},
        {"backing-shadow.qcow2", "has a backing file (/etc/shadow); flatten it with 'qemu-img convert -O qcow2 IN OUT'",
         nullptr},
        {"backing-device.qcow2", "has a backing file (/dev/sda); flatten it", nullptr},
        {"backing-json.qcow2",
         "has a backing file (json:{\"driver\":\"file\",\"filename\":\"/etc/shadow\"}); flatten it", nullptr},
        {"backing-relative.qcow2", "has a backing file (../x); flatten it", nullptr},
        {"backing-nbd.qcow2", "has a backing file (nbd://127.0.0.1:1/x); flatten it", nullptr},
        {"backing-handmade.qcow2", "has a backing file (/etc/passwd); flatten it", nullptr},
        {"backing-format-only.qcow2", "names a backing format (raw) in its qcow2 header but no backing file", nullptr},
        {"datafile.qcow2", "has an external data file (/tmp/svm-image-", nullptr},
        {"datafile-ext-only.qcow2", "has an external data file (/tmp/svm-image-", nullptr},
        {"datafile-bit-only.qcow2", "has an external data file; rewrite it as a single file", nullptr},
        {"raw-with-qcow2-header.raw", "has a backing file (/etc/shadow); flatten it", nullptr},
        {"polyglot-vdi.qcow2", "is at the same time a qcow2 and a vdi image", nullptr},
        {"huge.qcow2", "has a virtual size of 2 TiB, which exceeds this site's limit of 512 GiB", nullptr},
        {"truncated-header.qcow2", "is truncated (qcow2 header needs 104 bytes)", nullptr},
        {"truncated-header-v2.qcow2", "is truncated (qcow2 header needs 72 bytes)", nullptr},
        {"truncated-tables.qcow2", "is truncated (its qcow2 tables need", nullptr},
        {"empty.img", "is empty", nullptr},
        {"unknown-feature.qcow2", "has unknown incompatible qcow2 features (0x100000)", nullptr},
        {"corrupt.qcow2", "is marked corrupt in its qcow2 header", nullptr},
        {"version4.qcow2", "uses qcow2 version 4, which is not supported", nullptr},
        {"bad-cluster-bits.qcow2", "has an invalid qcow2 header (cluster_bits 30)", nullptr},
        {"encrypted-luks.qcow2", "uses qcow2 encryption, which is not supported", nullptr},
        {"encrypted-aes.qcow2", "uses qcow2 encryption, which is not supported", nullptr},
        {"image.vmdk", "is a vmdk image; convert it to qcow2 or raw", nullptr},
        {"descriptor.vmdk", "is a vmdk image; convert it to qcow2 or raw", nullptr},
        {"image.vdi", "is a vdi image; convert it", nullptr},
        {"image.vhdx", "is a vhdx image; convert it", nullptr},
        {"image.vpc", "is a vpc image; convert it", nullptr},
        {"fixed.vhd", "is a vpc image; convert it", nullptr},
        {"image.qed", "is a qed image; convert it", nullptr},
        {"image.parallels", "is a parallels image; convert it", nullptr},
        {"image.qcow", "is a qcow (version 1) image; convert it", nullptr},
        {"image.luks", "is a luks image; convert it", nullptr},
        {"image.bochs", "is a bochs image; convert it", nullptr},
        {"image.cloop", "is a cloop image; convert it", nullptr},
        {"image.dmg", "is a dmg image; convert it", nullptr},
        {"fifo", "is a FIFO, not a regular file", nullptr},
        {"directory.qcow2", "is a directory, not a disk image file", nullptr},
        {"null-device", "is a character device, not a regular file", nullptr},
        {"socket", "is a socket, not a regular file", nullptr},
        {"root-only.raw", "", kUnreadable},
        {"link-to-root-only.raw", "", kUnreadable},
        {"link-to-shadow.raw", "is not a disk image (a raw image is a whole number of 512-byte sectors", kUnreadable},
        {"other-user.qcow2", "", kUnreadable},
        {"allowed/inside.qcow2", "", nullptr},
        {"allowed/escape.qcow2", "", nullptr},
    };
    return c;
}

void check_sentence(const std::string& path, const std::string& reason, const std::string& expected) {
    INFO("reason: " << reason);
    if (expected.empty()) {
        CHECK(reason.empty());
        return;
    }
    CHECK(reason.find(expected) != std::string::npos);
    CHECK(reason.rfind(path + " ", 0) == 0);        // names the path first
    CHECK(reason.find('\n') == std::string::npos);  // one line
    CHECK(reason.find(". ") == std::string::npos);  // one sentence
}

struct Snapshot {
    std::string digest;
    uid_t uid;
    gid_t gid;
    mode_t mode;
    int64_t mtime_sec;
    long mtime_nsec;
    bool operator==(const Snapshot& o) const {
        return digest == o.digest && uid == o.uid && gid == o.gid && mode == o.mode && mtime_sec == o.mtime_sec &&
               mtime_nsec == o.mtime_nsec;
    }
};

Snapshot snapshot(const std::string& path) {
    struct stat st;
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    Snapshot s{"", st.st_uid, st.st_gid, st.st_mode, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
    if (S_ISREG(st.st_mode)) s.digest = svm::sha256_hex(svm::read_file(path));
    return s;
}

std::string write_script(const std::string& path, const std::string& body) {
    svm::test::make_file(path, "#!/bin/sh\n" + body + "\n", 0, 0755);
    return path;
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[image]") {
    CHECK(svm::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(svm::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(svm::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    svm::Sha256 h;
    std::string chunk(1000, 'a');
    for (int i = 0; i < 1000; ++i) h.update(chunk);
    CHECK(h.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // Odd split points exercise the buffering.
    svm::Sha256 s;
    std::string text = "The quick brown fox jumps over the lazy dog";
    s.update(text.data(), 3);
    s.update(text.data() + 3, text.size() - 3);
    CHECK(s.hex_digest() == "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592");
}

TEST_CASE("format_size names sizes in binary units", "[image]") {
    CHECK(svm::format_size(1000) == "1000 B");
    CHECK(svm::format_size(uint64_t(512) << 30) == "512 GiB");
    CHECK(svm::format_size(uint64_t(2) << 40) == "2 TiB");
    CHECK(svm::format_size((uint64_t(5) << 40) / 2) == "2.5 TiB");
}

TEST_CASE("header inspection tells every format and finds polyglots", "[image]") {
    auto& c = ImageCorpus::shared();
    auto inspect = [&](const std::string& name) {
        svm::UniqueFd fd(::open(c.path(name).c_str(), O_RDONLY | O_CLOEXEC));
        REQUIRE(fd);
        return svm::inspect_image(fd.get());
    };
    const std::map<std::string, svm::ImageFormat> single = {
        {"good.qcow2", svm::ImageFormat::qcow2},  {"good.raw", svm::ImageFormat::raw},
        {"image.vmdk", svm::ImageFormat::vmdk},   {"descriptor.vmdk", svm::ImageFormat::vmdk},
        {"image.vdi", svm::ImageFormat::vdi},     {"image.vhdx", svm::ImageFormat::vhdx},
        {"image.vpc", svm::ImageFormat::vpc},     {"fixed.vhd", svm::ImageFormat::vpc},
        {"image.qed", svm::ImageFormat::qed},     {"image.parallels", svm::ImageFormat::parallels},
        {"image.qcow", svm::ImageFormat::qcow},   {"image.luks", svm::ImageFormat::luks},
        {"image.bochs", svm::ImageFormat::bochs}, {"image.cloop", svm::ImageFormat::cloop},
        {"image.dmg", svm::ImageFormat::dmg},     {"raw-with-qcow2-header.raw", svm::ImageFormat::qcow2},
    };
    for (const auto& [name, fmt] : single) {
        INFO(name);
        auto h = inspect(name);
        CHECK(h.format == fmt);
        CHECK(h.claimed_by.size() == (fmt == svm::ImageFormat::raw ? 0u : 1u));
    }
    auto good = inspect("good.qcow2");
    CHECK(good.ok());
    CHECK(good.virtual_size == (64u << 20));
    CHECK(good.qcow2.version == 3);
    CHECK(good.qcow2.backing_file.empty());

    auto poly = inspect("polyglot-vdi.qcow2");
    CHECK(poly.claimed_by == std::vector<svm::ImageFormat>{svm::ImageFormat::qcow2, svm::ImageFormat::vdi});
    REQUIRE_FALSE(poly.ok());
    CHECK(poly.problems.front().kind == svm::ProblemKind::ambiguous_format);

    auto odd = inspect("odd.raw");
    CHECK(odd.format == svm::ImageFormat::raw);
    CHECK(odd.file_size == 1000);
    CHECK(odd.virtual_size == 1024);  // QEMU counts whole sectors

    auto backing = inspect("backing-shadow.qcow2");
    CHECK(backing.qcow2.backing_file == "/etc/shadow");
    CHECK(backing.qcow2.backing_format == "raw");
    auto data = inspect("datafile.qcow2");
    CHECK(data.qcow2.has_data_file_ext);
    CHECK(data.qcow2.data_file == c.path("datafile.data"));
    CHECK((data.qcow2.incompatible_features & svm::kQcow2IncompatDataFile) != 0);

    // Probes see the first 512 bytes zero padded, as QEMU does.
    uint8_t buf[512] = {};
    CHECK(svm::probe_formats(buf).empty());
    const uint8_t qcow2_magic_v3[] = {'Q', 'F', 'I', 0xfb, 0, 0, 0, 3}, vdi_signature[] = {0x7f, 0x10, 0xda, 0xbe};
    std::copy(std::begin(qcow2_magic_v3), std::end(qcow2_magic_v3), buf);
    std::copy(std::begin(vdi_signature), std::end(vdi_signature), buf + 0x40);
    CHECK(svm::probe_formats(buf) == std::vector<svm::ImageFormat>{svm::ImageFormat::qcow2, svm::ImageFormat::vdi});
    CHECK(svm::printable(std::string("a\nb\x01", 4)) == "a\\x0ab\\x01");
}

TEST_CASE("every corpus image gets its own verdict as the current user", "[image]") {
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();
    for (const auto& k : cases()) {
        INFO("image " << k.name);
        check_sentence(c.path(k.name), verdict_self(c.path(k.name), policy), k.self);
    }
}

TEST_CASE("every corpus image gets its own verdict as user nobody", "[image]") {
    REQUIRE(::geteuid() == 0);
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();
    for (const auto& k : cases()) {
        INFO("image " << k.name);
        check_sentence(c.path(k.name), verdict_nobody(c.path(k.name), policy), k.nobody ? k.nobody : k.self);
    }
    std::string missing = c.path("no-such.qcow2");
    check_sentence(missing, verdict_nobody(missing, policy), "does not exist for user nobody; check the path");
}

TEST_CASE("accepted images come back with format, sizes, identity and a usable fd", "[image]") {
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();
    svm::CheckedImage img = svm::open_image_as_user(c.path("good.qcow2"), nobody(), policy);
    CHECK(img.info.format == svm::ImageFormat::qcow2);
    CHECK(img.info.virtual_size == (64u << 20));
    CHECK(img.info.file_size > 0);
    CHECK(img.info.allocated_size > 0);
    CHECK(img.info.real_path == c.path("good.qcow2"));
    struct stat st;
    REQUIRE(::stat(c.path("good.qcow2").c_str(), &st) == 0);
    CHECK(img.info.identity == svm::identity_of(st));
    struct stat fst;
    REQUIRE(::fstat(img.fd.get(), &fst) == 0);
    CHECK(fst.st_ino == st.st_ino);
    CHECK((::fcntl(img.fd.get(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK((::fcntl(img.fd.get(), F_GETFL) & O_ACCMODE) == O_RDONLY);
    char magic[4];
    REQUIRE(::pread(img.fd.get(), magic, 4, 0) == 4);
    CHECK(std::string(magic, 4) == "QFI\xfb");

    // A symlink is followed with the user's rights; the real path is reported.
    auto linked = svm::open_image_as_self(c.path("link-to-root-only.raw"), policy);
    CHECK(linked.info.real_path == c.path("root-only.raw"));
    CHECK(linked.info.format == svm::ImageFormat::raw);

    // A raw image that is not a whole number of sectors is no disk image.
    CHECK_THROWS_WITH(svm::open_image_as_user(c.path("odd.raw"), nobody(), policy),
                      Catch::Contains("is not a disk image"));
}

TEST_CASE("qemu-img runs with the format we detected forced, never probing", "[image]") {
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();
    const std::string hostile = c.path("raw-with-qcow2-header.raw");
    // The fixture is hostile: qemu-img left to probe reads /etc/shadow as its backing file.
    auto probed = svm::run({"qemu-img", "info", "--output=json", hostile});
    REQUIRE(probed.ok());
    CHECK(probed.out.find("\"backing-filename\": \"/etc/shadow\"") != std::string::npos);

    svm::UniqueFd fd(::open(hostile.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    // Forced to raw, qemu-img sees no backing file at all.
    auto forced = svm::qemu_img_info(fd.get(), svm::ImageFormat::raw, hostile, policy);
    CHECK(forced.format == "raw");
    CHECK(forced.virtual_size == (1u << 20));
    CHECK(forced.backing_filename.empty());
    CHECK(forced.full_backing_filename.empty());
    CHECK(forced.json.find("shadow") == std::string::npos);
    // Our header rule calls the file qcow2 (what its bytes say) and refuses it before qemu-img runs.
    check_sentence(hostile, reason_of([&] { svm::check_image_fd(fd.get(), hostile, policy); }),
                   std::string("has a backing file (/etc/shadow)") + kFlatten);

    // The exact command line, seen by a wrapper that records its arguments.
    const std::string log = c.dir() + "/qemu-img-args.log";
    svm::test::make_file(log, "", 0, 0666);  // nobody's qemu-img appends too
    policy.qemu_img = write_script(c.dir() + "/qemu-img-recorder", "echo \"$@\" >> " + log + "\nexec qemu-img \"$@\"");
    svm::UniqueFd good(::open(c.path("good.qcow2").c_str(), O_RDONLY | O_CLOEXEC));
    svm::UniqueFd raw(::open(c.path("good.raw").c_str(), O_RDONLY | O_CLOEXEC));
    CHECK_NOTHROW(svm::check_image_fd(good.get(), c.path("good.qcow2"), policy));
    CHECK_NOTHROW(svm::check_image_fd(raw.get(), c.path("good.raw"), policy));
    CHECK_NOTHROW(svm::open_image_as_user(c.path("good.raw"), nobody(), policy));
    std::string args = svm::read_file(log);
    CHECK(args.find("info --output=json -f qcow2 /dev/fd/" + std::to_string(good.get()) + "\n") != std::string::npos);
    CHECK(args.find("info --output=json -f raw /dev/fd/" + std::to_string(raw.get()) + "\n") != std::string::npos);
    CHECK(std::count(args.begin(), args.end(), '\n') == 3);
    ::unlink(log.c_str());
}

TEST_CASE("a FIFO is refused at once and never blocks", "[image]") {
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();
    const std::string fifo = c.path("fifo");
    ::alarm(60);  // a hang kills the test run instead of blocking it
    long t0 = now_ms();
    check_sentence(fifo, verdict_nobody(fifo, policy), "is a FIFO, not a regular file");
    check_sentence(fifo, reason_of([&] { svm::open_image_as_self(fifo, policy); }), "is a FIFO, not a regular file");
    check_sentence(fifo, verdict_self(fifo, policy), "is a FIFO, not a regular file");
    long elapsed = now_ms() - t0;
    ::alarm(0);
    CHECK(elapsed < 5000);
}

TEST_CASE("qemu-img that hangs, spins or fails is stopped and reported", "[image]") {
    auto& c = ImageCorpus::shared();
    const std::string good = c.path("good.qcow2");
    svm::UniqueFd fd(::open(good.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);

    auto policy = test_policy();
    policy.qemu_img = write_script(c.dir() + "/qemu-img-hang", "sleep 30");
    policy.qemu_img_timeout_ms = 500;
    long t0 = now_ms();
    check_sentence(good, reason_of([&] { svm::check_image_fd(fd.get(), good, policy); }),
                   "took longer than 0.5 s to inspect with qemu-img");
    CHECK(now_ms() - t0 < 5000);

    policy = test_policy();
    policy.qemu_img = write_script(c.dir() + "/qemu-img-spin", "while :; do :; done");
    policy.qemu_img_cpu_s = 1;
    check_sentence(good, reason_of([&] { svm::check_image_fd(fd.get(), good, policy); }),
                   "made qemu-img exceed its CPU time limit of 1 s");

    policy = test_policy();
    policy.qemu_img_as_bytes = 16u << 20;  // far too little for qemu-img
    std::string r = reason_of([&] { svm::check_image_fd(fd.get(), good, policy); });
    check_sentence(good, r, "cannot be read as qcow2 by qemu-img (");

    // qemu-img disagreeing with the header (here: a lying wrapper) is a refusal.
    policy = test_policy();
    policy.qemu_img = write_script(
        c.dir() + "/qemu-img-liar",
        "echo '{\"format\": \"qcow2\", \"virtual-size\": 67108864, \"backing-filename\": \"/etc/shadow\"}'");
    check_sentence(good, reason_of([&] { svm::check_image_fd(fd.get(), good, policy); }),
                   "has a backing file (/etc/shadow) according to qemu-img");
    policy.qemu_img = write_script(c.dir() + "/qemu-img-liar2",
                                   "echo '{\"format\": \"qcow2\", \"virtual-size\": 1, \"format-specific\": "
                                   "{\"type\": \"qcow2\", \"data\": {\"data-file\": \"/dev/sda\"}}}'");
    check_sentence(good, reason_of([&] { svm::check_image_fd(fd.get(), good, policy); }),
                   "has an external data file (/dev/sda) according to qemu-img");
    policy.qemu_img =
        write_script(c.dir() + "/qemu-img-liar3", "echo '{\"format\": \"raw\", \"virtual-size\": 67108864}'");
    check_sentence(good, reason_of([&] { svm::check_image_fd(fd.get(), good, policy); }),
                   "reads as raw of 67108864 bytes to qemu-img but as qcow2 of 67108864 bytes to its header");
}

TEST_CASE("an image rewritten during the check is refused", "[image]") {
    auto& c = ImageCorpus::shared();
    const std::string victim = c.dir() + "/victim.qcow2";
    svm::test::make_file(victim, svm::read_file(c.path("good.qcow2")), 0);
    auto policy = test_policy();
    // A qemu-img that, while running, sees the file written to by someone else.
    policy.qemu_img = write_script(c.dir() + "/qemu-img-toucher", "printf x >> " + victim + "\nexec qemu-img \"$@\"");
    svm::UniqueFd fd(::open(victim.c_str(), O_RDONLY | O_CLOEXEC));
    check_sentence(victim, reason_of([&] { svm::check_image_fd(fd.get(), victim, policy); }),
                   "changed while it was being checked; submit again once nothing writes to it");
    ::unlink(victim.c_str());
}

TEST_CASE("allowed directories and path syntax", "[image]") {
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();
    policy.allowed_dirs = {c.path("allowed"), "/nonexistent/images/"};
    const std::string inside = c.path("allowed/inside.qcow2");
    const std::string escape = c.path("allowed/escape.qcow2");
    CHECK(verdict_nobody(inside, policy).empty());
    CHECK(verdict_self(inside, policy).empty());
    const std::string outside_msg = "(which is " + c.path("good.qcow2") +
                                    ") lies outside the allowed image directories (" + c.path("allowed") +
                                    ", /nonexistent/images/); move it into one of them";
    check_sentence(escape, verdict_nobody(escape, policy), outside_msg);
    check_sentence(escape, verdict_self(escape, policy), outside_msg);
    check_sentence(c.path("good.qcow2"), verdict_nobody(c.path("good.qcow2"), policy),
                   "lies outside the allowed image directories");

    std::string dotdot = c.path("allowed/../good.qcow2");
    check_sentence(dotdot, verdict_nobody(dotdot, policy), "contains a '..' component");
    check_sentence(dotdot, reason_of([&] { svm::open_image_as_self(dotdot, policy); }), "contains a '..' component");
    check_sentence("images/x.qcow2", verdict_nobody("images/x.qcow2", policy), "is not an absolute path");
    CHECK_NOTHROW(svm::check_image_path("/a/..b/c../.../x"));
    CHECK_THROWS(svm::check_image_path("/a/.."));
    CHECK_THROWS(svm::check_image_path(""));

    CHECK(svm::path_inside("/a/b/c", {"/a/b"}));
    CHECK(svm::path_inside("/a/b/c", {"/a/b/"}));
    CHECK(svm::path_inside("/a/b/c", {"/"}));
    CHECK_FALSE(svm::path_inside("/a/bc/d", {"/a/b"}));
    CHECK_FALSE(svm::path_inside("/a", {"/a/b"}));
}

TEST_CASE("checking images leaves their bytes, owner, mode and mtime unchanged", "[image]") {
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();
    std::map<std::string, Snapshot> before;
    for (const auto& n : c.names()) before[n] = snapshot(c.path(n));
    for (const auto& n : c.names()) {
        verdict_self(c.path(n), policy);
        verdict_nobody(c.path(n), policy);
        svm::UniqueFd fd(::open(c.path(n).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
        struct stat st;
        if (fd && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode))
            svm::image_digest(fd.get(), static_cast<uint64_t>(st.st_size));
    }
    for (const auto& n : c.names()) {
        INFO(n);
        CHECK(snapshot(c.path(n)) == before[n]);
    }
}

TEST_CASE("image_digest is the sha256 of the checked size, never more", "[image]") {
    auto& c = ImageCorpus::shared();
    auto independent = [](const std::string& content) {
        auto r = svm::run({"sha256sum"}, {.stdin_data = content});
        return "sha256:" + r.out.substr(0, 64);
    };
    auto digest_of = [&](const std::string& name, const std::string& content, uint64_t size) {
        svm::test::make_file(c.dir() + "/" + name, content, 0);
        svm::UniqueFd fd(::open((c.dir() + "/" + name).c_str(), O_RDONLY | O_CLOEXEC));
        std::string d = reason_of([&] { return svm::image_digest(fd.get(), size); });
        if (d.empty()) d = svm::image_digest(fd.get(), size);
        ::unlink((c.dir() + "/" + name).c_str());
        return d;
    };
    std::string small = "small image";
    CHECK(digest_of("d1", small, small.size()) == independent(small));
    std::string big(9 << 20, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
    std::string d = digest_of("d2", big, big.size());
    CHECK(d == independent(big));
    std::string middle = big;
    middle[big.size() / 2] ^= 1;  // every byte counts
    CHECK(digest_of("d3", middle, middle.size()) != d);
    CHECK(digest_of("d4", "", 0) == independent(""));
    // A file that grew since it was checked: only the checked bytes count.
    CHECK(digest_of("d5", big + "grown tail", big.size()) == d);
    // One that shrank: refused, not a digest of fewer bytes.
    CHECK(digest_of("d6", small, small.size() + 1).find("ended at 11 bytes") != std::string::npos);
}

TEST_CASE("digest_as_user reads as the user, bounded in time, once per version", "[image]") {
    auto& c = ImageCorpus::shared();
    const std::string f = c.dir() + "/digest-as-user.img", cache = c.dir() + "/digest-cache";
    svm::test::make_file(f, "the image's bytes", 0);  // 17 bytes
    svm::UniqueFd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st;
    REQUIRE(::fstat(fd.get(), &st) == 0);
    const svm::FileIdentity id = svm::identity_of(st);
    svm::DigestJob job;
    job.user = nobody();
    // The helper's place (slurm-vm-keeper --image-digest): the descriptor and
    // the size come last.
    job.helper = {"/usr/bin/python3", "-c",
                  "import hashlib, os, sys\n"
                  "fd, size = int(sys.argv[1]), int(sys.argv[2])\n"
                  "print('sha256:' + hashlib.sha256(os.pread(fd, size, 0)).hexdigest())\n"};
    job.timeout_ms = 20000;
    const std::string want = "sha256:" + svm::sha256_hex("the image's bytes");
    CHECK(svm::digest_as_user(fd.get(), id, f, job) == want);  // no cache: read each time

    // Who reads: the user (the uid it prints, as a digest's 64 digits).
    svm::DigestJob who = job;
    who.helper = {"/bin/sh", "-c", "printf 'sha256:%064d\\n' \"$(id -u)\"", "sh"};
    CHECK(svm::digest_as_user(fd.get(), id, f, who) == "sha256:" + std::string(59, '0') + "65534");

    // Bounded in time: a reader that hangs (a slow file system) is one sentence.
    svm::DigestJob slow = job;
    slow.helper = {"/bin/sh", "-c", "sleep 30", "sh"};
    slow.timeout_ms = 300;
    long t = now_ms();
    CHECK(reason_of([&] {
              svm::digest_as_user(fd.get(), id, f, slow);
          }).find("could not be read for its digest within 0.3 s") != std::string::npos);
    CHECK(now_ms() - t < 5000);

    // Once per version: the second job reads the cache (root's, 0700).
    job.cache_dir = cache;
    CHECK(svm::digest_as_user(fd.get(), id, f, job) == want);
    auto entries = svm::list_dir(cache);
    REQUIRE(entries.size() == 1);
    struct stat cst;
    REQUIRE(::stat(cache.c_str(), &cst) == 0);
    CHECK((cst.st_mode & 0777) == 0700);
    std::string planted = "sha256:" + std::string(64, 'a');
    svm::write_file_atomic(cache + "/" + entries[0], planted + "\n", 0600);
    CHECK(svm::digest_as_user(fd.get(), id, f, job) == planted);  // served from the cache

    // A file rewritten since the check (even with its mtime put back) is
    // refused, not hashed: it is not the version the guest was checked with.
    ::usleep(20000);
    svm::UniqueFd w(::open(f.c_str(), O_WRONLY | O_CLOEXEC));
    REQUIRE(::pwrite(w.get(), "THE", 3, 0) == 3);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    REQUIRE(::futimens(w.get(), times) == 0);
    REQUIRE(::pwrite(w.get(), "x", 1, 17) == 1);  // and grown
    CHECK(reason_of([&] { svm::digest_as_user(fd.get(), id, f, job); }).find("changed since it was checked") !=
          std::string::npos);
    ::unlink(f.c_str());
    svm::remove_tree(cache);
}

TEST_CASE("a file larger than its virtual size allows is refused before it is read", "[image]") {
    auto& c = ImageCorpus::shared();
    auto policy = test_policy();  // 512 GiB
    CHECK(svm::max_image_file_size(uint64_t(64) << 20) == (uint64_t(64) << 20) + (uint64_t(8) << 20) + (64 << 20));
    CHECK(svm::max_image_file_size(UINT64_MAX - 5) == UINT64_MAX);
    // The attack: a 64 MiB qcow2 with a sparse tail up to 8 TiB.
    const std::string sparse = c.dir() + "/sparse-tail.qcow2", raw = c.dir() + "/sparse.raw";
    svm::run_checked({"cp", c.path("good.qcow2"), sparse});
    REQUIRE(::truncate(sparse.c_str(), off_t(8) << 40) == 0);
    long t = now_ms();
    std::string why = verdict_self(sparse, policy);
    CHECK(why == sparse +
                     " is a file of 8 TiB, more than this site's limit for images (at most 576.1 GiB); write a "
                     "compact copy with 'qemu-img convert -O qcow2 IN OUT'");
    CHECK(verdict_nobody(sparse, policy) == why);
    // Under the site's limit but past what the header's virtual size needs.
    REQUIRE(::truncate(sparse.c_str(), off_t(1) << 30) == 0);
    CHECK(verdict_self(sparse, policy) ==
          sparse +
              " is a file of 1 GiB, more than what its virtual size of 64 MiB needs (at most 136 MiB); write a "
              "compact copy with 'qemu-img convert -O qcow2 IN OUT'");
    // Within the allowance: accepted (metadata, a little slack).
    REQUIRE(::truncate(sparse.c_str(), off_t(100) << 20) == 0);
    CHECK(verdict_self(sparse, policy) == "");
    CHECK(now_ms() - t < 20000);
    // A raw image's file is its virtual size: the site's limit bounds both.
    svm::test::make_file(raw, "", 0);
    REQUIRE(::truncate(raw.c_str(), off_t(8) << 40) == 0);
    CHECK(verdict_self(raw, policy).find("is a file of 8 TiB, more than this site's limit") != std::string::npos);
    ::unlink(sparse.c_str());
    ::unlink(raw.c_str());
}

TEST_CASE("the header reader is a pure function over the file's first and last bytes", "[image]") {
    auto& c = ImageCorpus::shared();
    for (const auto& n : c.names()) {
        svm::UniqueFd fd(::open(c.path(n).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
        struct stat st;
        if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        INFO(n);
        std::string head(static_cast<size_t>(std::min<uint64_t>(st.st_size, svm::kImageHeadBytes)), '\0'), tail;
        REQUIRE(::pread(fd.get(), head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()));
        if (st.st_size >= 512) {
            tail.resize(512);
            REQUIRE(::pread(fd.get(), tail.data(), 512, st.st_size - 512) == 512);
        }
        auto a = svm::inspect_image(fd.get());
        auto b = svm::inspect_image_bytes(reinterpret_cast<const uint8_t*>(head.data()), head.size(),
                                          reinterpret_cast<const uint8_t*>(tail.data()), tail.size(),
                                          static_cast<uint64_t>(st.st_size));
        CHECK(a.format == b.format);
        CHECK(a.virtual_size == b.virtual_size);
        CHECK(a.problems.size() == b.problems.size());
    }
    // Short or missing bytes are read as a short file, never past them.
    const uint8_t qfi[] = {'Q', 'F', 'I', 0xfb, 0, 0, 0, 3};
    auto t = svm::inspect_image_bytes(qfi, sizeof qfi, nullptr, 0, uint64_t(8) << 40);
    CHECK(t.format == svm::ImageFormat::qcow2);
    CHECK_FALSE(t.ok());
    CHECK(svm::inspect_image_bytes(nullptr, 0, nullptr, 0, 0).problems.front().kind == svm::ProblemKind::empty);
}

TEST_CASE("qemu-img's verdict is kept per file version, a refusal never", "[image]") {
    auto& c = ImageCorpus::shared();
    const std::string log = c.dir() + "/qemu-img-verdicts.log", cache = c.dir() + "/verdict-cache";
    const std::string f = c.dir() + "/verdict.qcow2";
    svm::test::make_file(log, "", 0, 0666);  // nobody's qemu-img appends too
    svm::test::make_file(f, svm::read_file(c.path("good.qcow2")), 0, 0644);
    auto runs = [&] {
        std::string s = svm::read_file(log);
        return std::count(s.begin(), s.end(), '\n');
    };
    auto policy = test_policy();
    policy.verdict_cache_dir = cache;
    policy.qemu_img = write_script(c.dir() + "/qemu-img-counter", "echo \"$@\" >> " + log + "\nexec qemu-img \"$@\"");

    // First check: qemu-img runs (as the user) and its verdict is kept, root's only.
    CHECK_NOTHROW(svm::open_image_as_user(f, nobody(), policy));
    CHECK(runs() == 1);
    struct stat cst;
    REQUIRE(::stat(cache.c_str(), &cst) == 0);
    CHECK((cst.st_mode & 0777) == 0700);
    REQUIRE(svm::list_dir(cache).size() == 1);
    // The same version again: our own header reading, no qemu-img.
    svm::CheckedImage again = svm::open_image_as_user(f, nobody(), policy);
    CHECK(runs() == 1);
    CHECK(again.info.format == svm::ImageFormat::qcow2);
    // Rewritten in place with its mtime put back: a new version, qemu-img again.
    struct stat st;
    REQUIRE(::fstat(again.fd.get(), &st) == 0);
    ::usleep(20000);
    {
        svm::UniqueFd w(::open(f.c_str(), O_WRONLY | O_CLOEXEC));
        REQUIRE(::pwrite(w.get(), "\0", 1, st.st_size - 1) == 1);
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        REQUIRE(::futimens(w.get(), times) == 0);
    }
    CHECK_NOTHROW(svm::open_image_as_user(f, nobody(), policy));
    CHECK(runs() == 2);
    CHECK(svm::list_dir(cache).size() == 2);

    // qemu-img that refuses (here: a lying wrapper) leaves nothing kept, and
    // is asked again next time.
    const std::string g = c.dir() + "/verdict2.qcow2";
    svm::test::make_file(g, svm::read_file(c.path("good.qcow2")), 0, 0644);
    policy.qemu_img = write_script(c.dir() + "/qemu-img-liar-counted",
                                   "echo \"$@\" >> " + log +
                                       "\necho '{\"format\": \"qcow2\", \"virtual-size\": 67108864, "
                                       "\"backing-filename\": \"/etc/shadow\"}'");
    for (int i = 0; i < 2; ++i)
        check_sentence(g, reason_of([&] { svm::open_image_as_user(g, nobody(), policy); }),
                       "has a backing file (/etc/shadow) according to qemu-img");
    CHECK(runs() == 4);
    CHECK(svm::list_dir(cache).size() == 2);
    for (const auto& p : {f, g, log}) ::unlink(p.c_str());
    svm::remove_tree(cache);
}
