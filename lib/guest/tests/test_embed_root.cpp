// The node's QEMU capabilities cache (embed_root.hpp): root's, whichever
// job's user libvirt probed as. The probe is stood in for by a script that
// does what libvirt's embedded driver does to its root: its lib/qemu tree
// handed to the QEMU identity, its capabilities XML in cache/qemu.
#include <sys/stat.h>
#include <unistd.h>

#include "catch.hpp"

#include "embed_root.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "support.hpp"

namespace {

void write_script(const std::string& path, const std::string& text) { svm::replace_file(path, text, 0755); }

std::vector<std::string> not_roots(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& n : svm::list_dir(dir)) {
        std::string p = svm::path_join(dir, n);
        struct stat st;
        REQUIRE(::lstat(p.c_str(), &st) == 0);
        if (st.st_uid != 0 || st.st_gid != 0) out.push_back(p);
        if (S_ISDIR(st.st_mode))
            for (const auto& q : not_roots(p)) out.push_back(q);
    }
    return out;
}

}  // namespace

TEST_CASE("the node's capabilities cache is root's, not the first job's user's", "[core]") {
    REQUIRE(::geteuid() == 0);  // chown
    svm::test::TempDir t;
    std::string cache = svm::path_join(t.path(), "state/libvirt-caps"), job = svm::path_join(t.path(), "job");
    std::string probe = svm::path_join(t.path(), "probe");
    // libvirt, privileged, chowns its lib/qemu tree to the configured user
    // (the job's: 4242:4343 here); a symlink in it is not followed.
    write_script(probe,
                 "#!/bin/sh\nset -e\n[ \"$1\" = --probe-capabilities ]\nr=$2\n"
                 "mkdir -p \"$r/lib/qemu/save\" \"$r/lib/qemu/nvram\" \"$r/cache/qemu/capabilities\"\n"
                 "echo '<qemuCaps/>' > \"$r/cache/qemu/capabilities/abc.xml\"\n"
                 "echo x > \"$r/lib/qemu/nvram/n\"\nln -s /etc/hostname \"$r/lib/qemu/link\"\n"
                 "chown -hR 4242:4343 \"$r/lib\" \"$r/cache\"\n");
    svm::mkdir_p(job, 0755);
    svm::seed_capabilities_cache(job, cache, svm::EmbedSettings{4242, 4343}, "/usr/bin/qemu-system-x86_64", probe);

    CHECK(svm::read_file(svm::path_join(job, "cache/qemu/capabilities/abc.xml")) == "<qemuCaps/>\n");
    CHECK(not_roots(cache).empty());
    struct stat st;
    REQUIRE(::stat("/etc/hostname", &st) == 0);
    CHECK(st.st_uid == 0);  // the symlink's target is untouched
    // The check can fail: the probe's tree as libvirt leaves it is not root's.
    svm::test::TempDir u;
    REQUIRE(::system(("sh " + probe + " --probe-capabilities " + u.path()).c_str()) == 0);
    CHECK_FALSE(not_roots(u.path()).empty());
    svm::own_capabilities_cache(u.path());
    CHECK(not_roots(u.path()).empty());
}
