#include "image_corpus.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm::test {

void qemu_img(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"qemu-img"};
    argv.insert(argv.end(), args.begin(), args.end());
    // QEMU calibrates LUKS key derivation with the thread's CPU time, which
    // fails now and then on a loaded machine ("Unable to get accurate CPU
    // usage"): retry that one error a few times.
    for (int attempt = 1;; ++attempt) {
        RunResult r = run(argv);
        if (r.ok()) return;
        if (attempt < 20 && (r.err + r.out).find("accurate CPU usage") != std::string::npos) continue;
        run_checked(argv);  // throws with the message
        return;
    }
}

void write_bytes(const std::string& path, uint64_t off, const std::string& bytes) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open " + path);
    if (::pwrite(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(off)) != static_cast<ssize_t>(bytes.size()))
        SVM_THROW_ERRNO("write " + path);
}

std::string read_bytes(const std::string& path, uint64_t off, size_t len) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) SVM_THROW_ERRNO("open " + path);
    std::string s(len, '\0');
    ssize_t n = ::pread(fd.get(), &s[0], len, static_cast<off_t>(off));
    if (n < 0) SVM_THROW_ERRNO("read " + path);
    s.resize(static_cast<size_t>(n));
    return s;
}

static std::string be(uint64_t v, int bytes) {
    std::string s;
    for (int i = bytes - 1; i >= 0; --i) s += static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
}

void put_be32(const std::string& path, uint64_t off, uint32_t v) { write_bytes(path, off, be(v, 4)); }
void put_be64(const std::string& path, uint64_t off, uint64_t v) { write_bytes(path, off, be(v, 8)); }

uint64_t get_be64(const std::string& path, uint64_t off) {
    std::string s = read_bytes(path, off, 8);
    uint64_t v = 0;
    for (unsigned char c : s) v = v << 8 | c;
    return v;
}

void copy_prefix(const std::string& from, const std::string& to, uint64_t len) {
    make_file(to, read_bytes(from, 0, static_cast<size_t>(len)), 0);
}

void make_file(const std::string& path, const std::string& content, uint64_t size, unsigned mode) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) SVM_THROW_ERRNO("create " + path);
    if (!content.empty() &&
        ::pwrite(fd.get(), content.data(), content.size(), 0) != static_cast<ssize_t>(content.size()))
        SVM_THROW_ERRNO("write " + path);
    if (size > content.size() && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
        SVM_THROW_ERRNO("truncate " + path);
    if (::fchmod(fd.get(), mode ? mode : 0644) != 0) SVM_THROW_ERRNO("chmod " + path);
}

ImageCorpus::ImageCorpus() {
    char tmpl[] = "/tmp/svm-image-XXXXXX";
    if (!::mkdtemp(tmpl)) SVM_THROW_ERRNO("mkdtemp");
    dir_ = tmpl;
    if (::chmod(dir_.c_str(), 0755) != 0) SVM_THROW_ERRNO("chmod " + dir_);
    try {
        build();
    } catch (...) {
        remove_tree(dir_);
        throw;
    }
}

ImageCorpus::~ImageCorpus() {
    try {
        remove_tree(dir_);
    } catch (...) {
    }
}

ImageCorpus& ImageCorpus::shared() {
    static std::unique_ptr<ImageCorpus> corpus(new ImageCorpus());
    return *corpus;
}

void ImageCorpus::build() {
    build_qcow2_and_raw();
    build_other_formats();
    build_special_files();
}

void ImageCorpus::qcow2(const std::string& name, const std::vector<std::string>& opts, const std::string& size) {
    std::vector<std::string> args = {"create", "-q", "-f", "qcow2"};
    args.insert(args.end(), opts.begin(), opts.end());
    args.push_back(path(name));
    args.push_back(size);
    qemu_img(args);
    add(name);
}

void ImageCorpus::build_qcow2_and_raw() {
    auto p = [&](const std::string& n) { return path(n); };
    // Header offsets (docs/interop/qcow2.txt).
    const uint64_t kVersion = 4, kBackingOffset = 8, kBackingSize = 16, kClusterBits = 20, kCrypt = 32,
                   kSnapshotsOffset = 64, kIncompat = 72;

    // Good images.
    qcow2("good.qcow2", {}, "64M");
    qcow2("good-v2.qcow2", {"-o", "compat=0.10"}, "16M");
    qcow2("good-zstd-l2.qcow2", {"-o", "compression_type=zstd,extended_l2=on"}, "16M");
    qcow2("dirty.qcow2", {"-o", "lazy_refcounts=on"}, "16M");
    put_be64(p("dirty.qcow2"), kIncompat, get_be64(p("dirty.qcow2"), kIncompat) | 1);  // dirty bit: accepted
    make_file(p("good.raw"), std::string(446, '\x90') + "\x55\xaa", 4 << 20);
    add("good.raw");
    make_file(p("odd.raw"), "an odd-sized raw disk", 1000);
    add("odd.raw");

    // Backing files: every kind of name QEMU would follow.
    qcow2("backing-shadow.qcow2", {"-u", "-b", "/etc/shadow", "-F", "raw"}, "1M");
    qcow2("backing-device.qcow2", {"-u", "-b", "/dev/sda", "-F", "raw"}, "1M");
    qcow2("backing-json.qcow2", {"-u", "-b", "json:{\"driver\":\"file\",\"filename\":\"/etc/shadow\"}", "-F", "raw"},
          "1M");
    qcow2("backing-relative.qcow2", {"-u", "-b", "../x", "-F", "qcow2"}, "1M");
    qcow2("backing-nbd.qcow2", {"-u", "-b", "nbd://127.0.0.1:1/x", "-F", "raw"}, "1M");
    // A backing file name with no backing-format extension, written by hand.
    qcow2("backing-handmade.qcow2", {}, "1M");
    write_bytes(p("backing-handmade.qcow2"), 0x800, "/etc/passwd");
    put_be64(p("backing-handmade.qcow2"), kBackingOffset, 0x800);
    put_be32(p("backing-handmade.qcow2"), kBackingSize, 11);
    // A backing-format extension left behind without a backing file.
    qcow2("backing-format-only.qcow2", {"-u", "-b", "/etc/shadow", "-F", "raw"}, "1M");
    put_be64(p("backing-format-only.qcow2"), kBackingOffset, 0);
    put_be32(p("backing-format-only.qcow2"), kBackingSize, 0);

    // External data files: the bit with the extension, the extension alone, the bit alone.
    qcow2("datafile.qcow2", {"-o", "data_file=" + p("datafile.data")}, "1M");
    add("datafile.data");
    make_file(p("datafile-ext-only.qcow2"), read_file(p("datafile.qcow2")), 0);
    add("datafile-ext-only.qcow2");
    put_be64(p("datafile-ext-only.qcow2"), kIncompat, get_be64(p("datafile-ext-only.qcow2"), kIncompat) & ~4ull);
    qcow2("datafile-bit-only.qcow2", {}, "1M");
    put_be64(p("datafile-bit-only.qcow2"), kIncompat, get_be64(p("datafile-bit-only.qcow2"), kIncompat) | 4);

    // A raw disk whose first sectors are a qcow2 header naming /etc/shadow as backing file
    // (what a guest can write to its own raw disk).
    make_file(p("raw-with-qcow2-header.raw"), read_bytes(p("backing-shadow.qcow2"), 0, 4096), 1 << 20);
    add("raw-with-qcow2-header.raw");

    // Polyglot: a valid qcow2 that also carries the vdi signature at 0x40
    // (the high half of snapshots_offset, unused with no snapshots).
    qcow2("polyglot-vdi.qcow2", {}, "1M");
    write_bytes(p("polyglot-vdi.qcow2"), kSnapshotsOffset, std::string("\x7f\x10\xda\xbe", 4));

    qcow2("huge.qcow2", {}, "2T");
    copy_prefix(p("good.qcow2"), p("truncated-header.qcow2"), 50);
    add("truncated-header.qcow2");
    copy_prefix(p("good-v2.qcow2"), p("truncated-header-v2.qcow2"), 60);
    add("truncated-header-v2.qcow2");
    copy_prefix(p("good.qcow2"), p("truncated-tables.qcow2"), 65536);
    add("truncated-tables.qcow2");
    make_file(p("empty.img"), "", 0);
    add("empty.img");

    qcow2("unknown-feature.qcow2", {}, "1M");
    put_be64(p("unknown-feature.qcow2"), kIncompat, get_be64(p("unknown-feature.qcow2"), kIncompat) | (1ull << 20));
    qcow2("corrupt.qcow2", {}, "1M");
    put_be64(p("corrupt.qcow2"), kIncompat, get_be64(p("corrupt.qcow2"), kIncompat) | 2);
    qcow2("version4.qcow2", {}, "1M");
    put_be32(p("version4.qcow2"), kVersion, 4);
    qcow2("bad-cluster-bits.qcow2", {}, "1M");
    put_be32(p("bad-cluster-bits.qcow2"), kClusterBits, 30);
    qcow2("encrypted-luks.qcow2",
          {"--object", "secret,id=s0,data=secret", "-o",
           "encrypt.format=luks,encrypt.key-secret=s0,encrypt.iter-time=10"},
          "1M");
    qcow2("encrypted-aes.qcow2", {}, "1M");  // legacy AES, flagged by hand
    put_be32(p("encrypted-aes.qcow2"), kCrypt, 1);
}

void ImageCorpus::build_other_formats() {
    auto p = [&](const std::string& n) { return path(n); };
    // Formats we do not accept.
    for (const char* f : {"vmdk", "vdi", "vhdx", "vpc", "qed", "parallels", "qcow"}) {
        std::string name = std::string("image.") + f;
        qemu_img({"create", "-q", "-f", f, p(name), "1M"});
        add(name);
    }
    qemu_img({"create", "-q", "-f", "vpc", "-o", "subformat=fixed", p("fixed.vhd"), "1M"});
    add("fixed.vhd");
    qemu_img({"create", "-q", "-f", "luks", "--object", "secret,id=s0,data=secret", "-o", "key-secret=s0,iter-time=10",
              p("image.luks"), "1M"});
    add("image.luks");
    make_file(p("descriptor.vmdk"),
              "# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n"
              "RW 2048 FLAT \"/etc/shadow\" 0\n",
              0);
    add("descriptor.vmdk");
    {
        std::string h(512, '\0');
        std::memcpy(&h[0], "Bochs Virtual HD Image", 22);
        std::memcpy(&h[32], "Redolog", 7);
        std::memcpy(&h[48], "Growing", 7);
        h[66] = 2;  // version 0x00020000, little-endian
        make_file(p("image.bochs"), h, 1 << 20);
        add("image.bochs");
    }
    make_file(p("image.cloop"),
              std::string("#!/bin/sh\n#V2.0 Format\nmodprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n") +
                  std::string(1, '\0'),
              65536);
    add("image.cloop");
    make_file(p("image.dmg"), "", 1 << 20);
    write_bytes(p("image.dmg"), (1 << 20) - 512, "koly");
    add("image.dmg");
}

void ImageCorpus::build_special_files() {
    auto p = [&](const std::string& n) { return path(n); };
    // Not regular files, and files nobody may read.
    if (::mkfifo(p("fifo").c_str(), 0666) != 0) SVM_THROW_ERRNO("mkfifo");
    add("fifo");
    mkdir_p(p("directory.qcow2"));
    add("directory.qcow2");
    if (::mknod(p("null-device").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) SVM_THROW_ERRNO("mknod");
    add("null-device");
    {
        UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        struct sockaddr_un a = {};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, p("socket").c_str(), sizeof a.sun_path - 1);
        if (::bind(s.get(), reinterpret_cast<struct sockaddr*>(&a), sizeof a) != 0) SVM_THROW_ERRNO("bind socket");
        ::chmod(p("socket").c_str(), 0666);
        add("socket");
    }
    make_file(p("root-only.raw"), "root's raw disk", 1 << 20, 0600);
    add("root-only.raw");
    if (::symlink(p("root-only.raw").c_str(), p("link-to-root-only.raw").c_str()) != 0) SVM_THROW_ERRNO("symlink");
    add("link-to-root-only.raw");
    if (::symlink("/etc/shadow", p("link-to-shadow.raw").c_str()) != 0) SVM_THROW_ERRNO("symlink");
    add("link-to-shadow.raw");
    qcow2("other-user.qcow2", {}, "1M");
    if (::chown(p("other-user.qcow2").c_str(), 12345, 12345) != 0 || ::chmod(p("other-user.qcow2").c_str(), 0600) != 0)
        SVM_THROW_ERRNO("chown other-user.qcow2");

    // An allowed directory with a good image and a symlink that leads out of it.
    mkdir_p(p("allowed"));
    add("allowed");
    qcow2("allowed/inside.qcow2", {}, "1M");
    if (::symlink(p("good.qcow2").c_str(), p("allowed/escape.qcow2").c_str()) != 0) SVM_THROW_ERRNO("symlink");
    add("allowed/escape.qcow2");
}

}  // namespace svm::test
