// The site's catalogue of images and its partitions' VM modes (site_catalogue.hpp).
#include "catch.hpp"

#include "config.hpp"
#include "error.hpp"
#include "site_catalogue.hpp"

namespace {
const char* kSite = R"({"state_dir": "/run/slurm-vm",
  "images": {"rocky9": {"path": "/shared/images/rocky9.qcow2", "description": "Rocky Linux 9, Open MPI"},
             "fast": {"path": "/shared/images/fast.qcow2", "kernel": "/shared/images/vmlinuz",
                      "initrd": "/shared/images/initrd", "cmdline": "console=ttyS0"}},
  "partitions": {"vm": {"vm": "required", "image": "rocky9"},
                 "mixed": {"vm": "default", "image": "fast"},
                 "debug": {"vm": "optional"}}})";

svm::SiteCatalogue site() { return svm::parse_config(kSite, "n1", "test").site; }

void bad(const std::string& text, const std::string& says) {
    try {
        svm::parse_config(text, "n1", "test");
        FAIL("accepted: " << text);
    } catch (const svm::Error& e) {
        INFO(e.chain());
        CHECK(e.chain().find(says) != std::string::npos);
    }
}
}  // namespace

TEST_CASE("site catalogue: parsed from the node configuration, sorted, validated", "[catalogue]") {
    auto cat = site();
    REQUIRE(cat.images.size() == 2);
    CHECK(cat.images[0].name == "fast");
    CHECK(cat.images[0].kernel == "/shared/images/vmlinuz");
    CHECK(cat.find_image("rocky9")->description == "Rocky Linux 9, Open MPI");
    CHECK(cat.find_partition("vm")->mode == svm::VmMode::required);
    CHECK(cat.find_partition("mixed")->mode == svm::VmMode::by_default);
    CHECK(cat.find_partition("nope") == nullptr);
    CHECK(svm::parse_config(R"({"state_dir": "/x"})", "n", "t").site.images.empty());

    bad(R"({"images": {"a": {"path": "rel.qcow2"}}})", "images.a.path must be an absolute path");
    bad(R"({"images": {"a": {}}})", "images.a needs \"path\"");
    bad(R"({"images": {"a/b": {"path": "/x"}}})", "images: \"a/b\" is not an image name: letters, digits");
    bad(R"({"images": {"none": {"path": "/x"}}})", "images: \"none\" is not an image name");
    bad(R"({"images": {"a": {"path": "/x", "cmdline": "a\nb"}}})", "images.a.cmdline must be a single line");
    bad(R"({"images": {"a": {"path": "/x", "size": 3}}})", "images.a: unknown key \"size\"");
    bad(R"({"images": {"a": {"path": "/x", "initrd": "/i"}}})", "\"initrd\" needs \"kernel\"");
    bad(R"({"images": {"a": {"path": "/x"}}, "partitions": {"p": {"vm": "always", "image": "a"}}})",
        "partitions.p.vm must be");
    bad(R"({"images": {"a": {"path": "/x"}}, "partitions": {"p": {"vm": "required"}}})", "needs \"image\"");
    bad(R"({"images": {"a": {"path": "/x"}}, "partitions": {"p": {"vm": "default", "image": "b"}}})",
        "partitions.p.image \"b\" is not in \"images\"");
    bad(R"({"images": [1]})", "images must be an object");
}

TEST_CASE("site catalogue: what a job runs in, per partition", "[catalogue]") {
    auto cat = site();
    // A path is a path, whatever the partition.
    auto c = svm::choose_vm(cat, "/home/u/my.qcow2", {"debug"});
    CHECK((c.vm && c.image == "/home/u/my.qcow2" && c.image_name.empty() && c.refusal.empty()));
    // A catalogue name resolves, with the entry's kernel.
    c = svm::choose_vm(cat, "fast", {});
    CHECK((c.vm && c.image == "/shared/images/fast.qcow2" && c.kernel == "/shared/images/vmlinuz" &&
           c.image_name == "fast"));
    // An unknown name: one sentence that says where the list is.
    c = svm::choose_vm(cat, "rocky8", {"debug"});
    CHECK(!c.vm);
    CHECK(c.refusal.find("--vm-image=rocky8 is not an image of this site's catalogue (`slurm-vm images`") == 0);
    // No image: the partition's default, or none.
    c = svm::choose_vm(cat, "", {"mixed"});
    CHECK((c.vm && c.image_name == "fast"));
    c = svm::choose_vm(cat, "", {"vm"});
    CHECK((c.vm && c.image_name == "rocky9"));
    CHECK(!svm::choose_vm(cat, "", {"debug"}).vm);
    CHECK(!svm::choose_vm(cat, "", {"unlisted"}).vm);
    CHECK(!svm::choose_vm(cat, "", {}).vm);
    // --vm-image=none: the host where the partition allows it.
    c = svm::choose_vm(cat, "none", {"mixed"});
    CHECK((!c.vm && c.refusal.empty()));
    c = svm::choose_vm(cat, "none", {"debug", "vm"});
    CHECK(!c.vm);
    CHECK(c.refusal ==
          "partition vm runs every job in a virtual machine, so --vm-image=none is refused there: drop it (the "
          "partition's image is rocky9) or submit to another partition");
    CHECK(c.refusal.find('\n') == std::string::npos);
    // Several partitions: the strictest one decides at submit.
    c = svm::choose_vm(cat, "", {"mixed", "vm"});
    CHECK(c.image_name == "rocky9");
}

TEST_CASE("site catalogue: names, partition lists and command lines", "[catalogue]") {
    CHECK(svm::is_catalogue_name("rocky9"));
    CHECK(svm::is_catalogue_name("debian-12_cloud.v2+mpi"));
    CHECK_FALSE(svm::is_catalogue_name("none"));
    CHECK_FALSE(svm::is_catalogue_name("./x"));
    CHECK_FALSE(svm::is_catalogue_name(".hidden"));
    CHECK_FALSE(svm::is_catalogue_name("a b"));
    CHECK_FALSE(svm::is_catalogue_name(""));
    CHECK(svm::split_partitions("a,b,,c") == std::vector<std::string>{"a", "b", "c"});
    CHECK(svm::split_partitions("").empty());
    using V = std::vector<std::string>;
    CHECK(svm::partition_from_args(V{"sbatch", "-p", "vm", "job.sh"}) == "vm");
    CHECK(svm::partition_from_args(V{"sbatch", "-pvm", "job.sh"}) == "vm");
    CHECK(svm::partition_from_args(V{"sbatch", "--partition=a,b", "job.sh"}) == "a,b");
    CHECK(svm::partition_from_args(V{"srun", "--partition", "x", "-p", "y", "hostname"}) == "y");
    CHECK(svm::partition_from_args(V{"sbatch", "job.sh"}).empty());
    CHECK(svm::partition_from_args(V{"srun", "--", "cmd", "-p", "z"}).empty());
}

TEST_CASE("site catalogue: `slurm-vm images` output", "[catalogue]") {
    auto cat = site();
    std::string t = svm::format_catalogue(cat);
    INFO(t);
    CHECK(t.find("rocky9  /shared/images/rocky9.qcow2\n") != std::string::npos);
    CHECK(t.find("Rocky Linux 9, Open MPI") != std::string::npos);
    CHECK(t.find("  vm: always (--vm-image=none is refused); image rocky9") != std::string::npos);
    CHECK(t.find("  mixed: by default") != std::string::npos);
    CHECK(t.find("debug") == std::string::npos);
    CHECK(svm::format_catalogue({}).find("lists no images") != std::string::npos);
    std::string j = svm::catalogue_json(cat);
    CHECK(j.find("\"rocky9\"") != std::string::npos);
    CHECK(j.find("\"required\"") != std::string::npos);
}
