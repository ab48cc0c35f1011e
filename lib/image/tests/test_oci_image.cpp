// Registry images (oci_image.hpp): references, the disk inside an OCI layout
// as KubeVirt's containerDisk packages it, and the cache's bound.
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "oci_image.hpp"
#include "proc.hpp"
#include "support.hpp"

namespace {
std::string sha_file(const std::string& path) {
    return svm::run_checked({"/bin/sh", "-c", "sha256sum < " + svm::shell_quote(path) + " | cut -c1-64"}).substr(0, 64);
}

// An OCI image layout whose layers are the given directories (tar.gz each).
std::string make_layout(const std::string& dir, const std::vector<std::string>& layer_dirs) {
    std::string layout = dir + "/layout";
    svm::mkdir_p(layout + "/blobs/sha256");
    std::string layers;
    for (size_t i = 0; i < layer_dirs.size(); ++i) {
        std::string tgz = dir + "/layer" + std::to_string(i) + ".tgz";
        svm::run_checked({"tar", "-czf", tgz, "-C", layer_dirs[i], "."});
        std::string h = sha_file(tgz);
        svm::run_checked({"mv", tgz, layout + "/blobs/sha256/" + h});
        layers += std::string(i ? "," : "") +
                  R"({"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:)" + h + "\"}";
    }
    std::string manifest = R"({"schemaVersion":2,"layers":[)" + layers + "]}";
    svm::write_file_atomic(dir + "/m.json", manifest);
    std::string mh = sha_file(dir + "/m.json");
    svm::run_checked({"mv", dir + "/m.json", layout + "/blobs/sha256/" + mh});
    svm::write_file_atomic(layout + "/index.json",
                           R"({"schemaVersion":2,"manifests":[{"digest":"sha256:)" + mh + "\"}]}");
    return layout;
}
}  // namespace

TEST_CASE("oci: references", "[oci]") {
    CHECK(svm::is_registry_ref("docker://registry.example.org/hpc/rocky9:1.2"));
    CHECK(svm::is_registry_ref("oci://localhost:5000/svm/disk"));
    CHECK_FALSE(svm::is_registry_ref("/shared/images/x.qcow2"));
    CHECK_FALSE(svm::is_registry_ref("rocky9"));
    CHECK(svm::skopeo_ref("oci://localhost:5000/svm/disk:v1") == "docker://localhost:5000/svm/disk:v1");
    CHECK(svm::skopeo_ref("docker://r.example/a/b@sha256:" + std::string(64, 'a')) ==
          "docker://r.example/a/b@sha256:" + std::string(64, 'a'));
    CHECK(svm::registry_of("docker://localhost:5000/svm/disk:v1") == "localhost:5000");
    CHECK(svm::skopeo_message(
              "time=\"2026-01-01T00:00:00Z\" level=fatal msg=\"Error parsing image name \\\"docker://r/x:v1\\\": "
              "manifest unknown\"\n") == "Error parsing image name \"docker://r/x:v1\": manifest unknown");
    CHECK(svm::skopeo_message("plain error\n") == "plain error");
    for (std::string bad : {"docker://", "docker://noslash", "docker://r/a b", "docker://r/../x", "docker://r/a;rm",
                            "docker://r/a@sha256:zz", "docker:///abs", "docker://r/a/"}) {
        INFO(bad);
        try {
            svm::skopeo_ref(bad);
            FAIL("accepted " << bad);
        } catch (const svm::Error& e) {
            CHECK(e.reason().find("--vm-image=" + bad) == 0);
        }
    }
}

TEST_CASE("oci: the disk file of a containerDisk layout", "[oci]") {
    svm::test::TempDir d_dir("svm-oci");
    std::string d = d_dir.path();
    svm::mkdir_p(d + "/l0/etc");
    svm::write_file_atomic(d + "/l0/etc/os-release", "base layer\n");
    svm::mkdir_p(d + "/l1/disk");
    svm::write_file_atomic(d + "/l1/disk/disk.qcow2", "QFI\xfb the disk");
    std::string layout = make_layout(d, {d + "/l0", d + "/l1"});
    svm::DiskMember m = svm::find_disk_member(layout);
    CHECK(m.member == "./disk/disk.qcow2");
    CHECK(svm::run_checked({"tar", "-xO", "-f", m.blob, "--", m.member}) == "QFI\xfb the disk");

    // No disk: one sentence; a symlink or a nested file does not count.
    svm::test::TempDir e_dir("svm-oci");
    std::string e = e_dir.path();
    svm::mkdir_p(e + "/l0/disk/sub");
    svm::write_file_atomic(e + "/l0/disk/sub/x.qcow2", "nested");
    REQUIRE(::symlink("/etc/shadow", (e + "/l0/disk/link.qcow2").c_str()) == 0);
    std::string bad = make_layout(e, {e + "/l0"});
    try {
        svm::find_disk_member(bad);
        FAIL("found a disk where there is none");
    } catch (const svm::Error& err) {
        CHECK(err.reason().find("holds no disk file under /disk/") != std::string::npos);
    }
}

TEST_CASE("oci: the cache keeps its bound, the entries in use and the newest", "[oci]") {
    svm::test::TempDir d_dir("svm-oci");
    std::string d = d_dir.path();
    auto entry = [&](const std::string& name, size_t bytes, time_t used) {
        svm::mkdir_p(d + "/" + name);
        svm::write_file_atomic(d + "/" + name + "/disk.img", std::string(bytes, 'x'));
        svm::write_file_atomic(d + "/" + name + "/used", "0\n");
        struct utimbuf t {
            used, used
        };
        ::utime((d + "/" + name + "/used").c_str(), &t);
        return d + "/" + name;
    };
    std::string a = entry("aaa", 1 << 20, 1000), b = entry("bbb", 1 << 20, 2000), c = entry("ccc", 1 << 20, 3000);
    svm::mkdir_p(d + "/.pull-tmp");  // a pull in progress is not an entry
    svm::OciSettings s;
    s.cache_dir = d;
    CHECK(svm::oci_cache_entry_of(s, b + "/disk.img") == b);
    CHECK(svm::oci_cache_entry_of(s, "/elsewhere/disk.img").empty());
    // Room for two: the least recently used goes, unless a job uses it.
    auto removed = svm::prune_oci_cache(d, (2 << 20) + (64 << 10), {a});
    CHECK(removed == std::vector<std::string>{b});
    CHECK(svm::path_exists(a));
    CHECK(svm::path_exists(c));
    CHECK(svm::path_exists(d + "/.pull-tmp"));
    // Room for none: everything not in use and not kept goes.
    removed = svm::prune_oci_cache(d, 0, {}, c);
    CHECK(removed == std::vector<std::string>{a});
    CHECK(svm::path_exists(c));
}

TEST_CASE("oci: a layer past its bounds (a gzip bomb, a flood of entries) is refused in one sentence", "[oci]") {
    svm::test::TempDir d_dir("svm-oci");
    std::string d = d_dir.path();
    // 64 MiB of zeros: about 64 KiB gzipped.
    svm::mkdir_p(d + "/l0/disk");
    svm::run_checked({"truncate", "-s", "64M", d + "/l0/disk/disk.img"});
    std::string layout = make_layout(d, {d + "/l0"});
    auto reason = [&](const std::string& lay, const svm::LayerBounds& b) {
        return svm::test::reason_of([&] { svm::find_disk_member(lay, b); });
    };
    std::string why = reason(layout, svm::LayerBounds{16u << 20, 100, 60000});
    CHECK(why == "a layer of the image decompresses to more than 16 MiB, this node's bound (oci.max_layer_gib)");
    // Within the bound: found.
    CHECK(svm::find_disk_member(layout, svm::LayerBounds{128u << 20, 100, 60000}).member == "./disk/disk.img");

    // 300 entries, 100 allowed.
    svm::test::TempDir e_dir("svm-oci");
    std::string e = e_dir.path();
    svm::mkdir_p(e + "/l0/etc");
    for (int i = 0; i < 300; ++i) svm::write_file_atomic(e + "/l0/etc/f" + std::to_string(i), "x");
    svm::mkdir_p(e + "/l0/disk");
    svm::write_file_atomic(e + "/l0/disk/disk.img", "QFI\xfb");
    std::string many = make_layout(e, {e + "/l0"});
    CHECK(reason(many, svm::LayerBounds{1u << 30, 100, 60000}) ==
          "a layer of the image holds more than 100 entries, this node's bound (oci.max_layer_entries)");
    CHECK(svm::find_disk_member(many, svm::LayerBounds{1u << 30, 1000, 60000}).member == "./disk/disk.img");
    // Garbage that is no tar archive.
    svm::test::TempDir g_dir("svm-oci");
    std::string g = g_dir.path();
    svm::mkdir_p(g + "/l0/disk");
    std::string lay = make_layout(g, {g + "/l0"});
    for (const auto& f : svm::list_dir(lay + "/blobs/sha256")) {
        std::string text = svm::read_file(lay + "/blobs/sha256/" + f);
        if (text.find("layers") == std::string::npos) svm::write_file_atomic(lay + "/blobs/sha256/" + f, "junk");
    }
    CHECK(reason(lay, svm::LayerBounds{}).find("a layer of the image is not a tar archive") == 0);
}
