// The node configuration is checked against etc/*.schema.json when it is
// loaded, before any value is read (lib/base/json_schema.hpp): the shipped
// example, the device fixtures, rules only the schema states, and its ranges
// against the code's.
#include "catch.hpp"
#include "config.hpp"
#include "fs.hpp"
#include "hugepages.hpp"
#include "irq_profile.hpp"
#include "json.hpp"
#include "json_schema.hpp"
#include "support.hpp"

using svm::test::reason_of;

namespace {

const std::string kSource = SVM_SOURCE_DIR;

}  // namespace

TEST_CASE("schema: the shipped example and every valid device fixture pass, invalid fixtures fail", "[schema]") {
    svm::Json example = svm::json_load_file(kSource + "/etc/slurm-vm.json");
    CHECK(reason_of([&] { svm::validate_node_config(example.get()); }) == "");
    for (const char* kind : {"valid", "invalid"}) {
        for (const auto& f : svm::list_dir(kSource + "/tests/fixtures/devices/" + kind)) {
            INFO(kind << "/" << f);
            svm::Json doc = svm::json_load_file(kSource + "/tests/fixtures/devices/" + kind + "/" + f);
            std::string r = reason_of([&] { svm::validate_node_config(doc.get()); });
            if (std::string(kind) == "valid") CHECK(r == "");
            else CHECK(r.rfind("devices", 0) == 0);
        }
    }
}

TEST_CASE("schema: load_config refuses what only the schema rules out", "[schema]") {
    svm::test::TempDir d("svm-schema");
    std::string path = d.path() + "/slurm-vm.json";
    svm::write_file_atomic(path, R"({"state_dir": "/run/x", "memory_overhead_mib": -5})");
    CHECK(reason_of([&] { svm::load_config(path, "n1"); }) == "memory_overhead_mib must be at least 0 (it is -5)");
    svm::write_file_atomic(path, R"({"state_dir": "/run/x", "min_guest_memory_mib": 10})");
    CHECK(reason_of([&] { svm::load_config(path, "n1"); }) == "min_guest_memory_mib must be at least 64 (it is 10)");
    svm::write_file_atomic(path, R"({"state_dir": "/run/x", "min_guest_memory_mib": 256})");
    CHECK_NOTHROW(svm::load_config(path, "n1"));
}

TEST_CASE("schema: a document it refuses is refused before any value is read", "[schema]") {
    // Each document also breaks a rule the reading checks (a partition's image
    // missing from the catalogue): the schema's sentence comes first.
    const std::string missing_image = R"("partitions": {"p": {"vm": "default", "image": "nope"}})";
    CHECK(reason_of([&] { svm::parse_config("{" + missing_image + "}", "n", "t"); }) ==
          "partitions.p.image \"nope\" is not in \"images\"");
    CHECK(reason_of([&] { svm::parse_config(R"({"log_dir": "var/log", )" + missing_image + "}", "n", "t"); }) ==
          "log_dir must be an absolute path (it is \"var/log\")");
    // Values a reader would cut or shift out of range never reach it.
    CHECK(reason_of([&] { svm::parse_config(R"({"boot_timeout_s": 4294967301})", "n", "t"); }) ==
          "boot_timeout_s must be at most 86400 (it is 4294967301)");
    CHECK(reason_of([&] { svm::parse_config(R"({"max_image_virtual_size_gib": 17179869184})", "n", "t"); }) ==
          "max_image_virtual_size_gib must be at most 1048576 (it is 17179869184)");
    CHECK(reason_of([&] { svm::parse_config(R"({"network": {"underlay": 5}})", "n", "t"); }) ==
          "network.underlay must be a name template or an object of addresses (it is 5)");
    CHECK(reason_of([&] { svm::parse_config(R"({"network": {"underlay": {"a": "10.0.0.300"}}})", "n", "t"); }) ==
          "network.underlay.a must be an IPv4 address such as \"10.215.0.1\" (it is \"10.0.0.300\")");
    CHECK(reason_of([&] { svm::parse_config("[]", "n", "t"); }) == "the configuration must be an object");
    CHECK(reason_of([&] { svm::parse_config(R"({"network": {"prefix": "300.1.0.0/16"}})", "n", "t"); }) ==
          "network.prefix must be an IPv4 /16 such as \"10.213.0.0/16\" (it is \"300.1.0.0/16\")");
    // The file's name comes first in what an admin reads.
    CHECK(svm::test::error_of([] { svm::parse_config(R"({"stat_dir": "/x"})", "n", "/etc/slurm-vm/slurm-vm.json"); }) ==
          "/etc/slurm-vm/slurm-vm.json: the configuration: unknown key \"stat_dir\"");
}

TEST_CASE("schema: its ranges agree with the code that uses the values", "[schema]") {
    svm::Json schema = svm::json_load_file(kSource + "/etc/slurm-vm.schema.json");
    const json_t* props = json_object_get(schema.get(), "properties");
    auto max_of = [&](const char* key) {
        return json_integer_value(json_object_get(json_object_get(props, key), "maximum"));
    };
    CHECK(max_of("job_gid_base") == 0x7fffffffLL - svm::kMaxJobGidSpan);
    std::string profiles;
    size_t i;
    json_t* v;
    json_array_foreach(json_object_get(json_object_get(props, "irq_profile"), "enum"), i, v) profiles +=
        (profiles.empty() ? "" : ", ") + std::string(json_string_value(v));
    CHECK(profiles == svm::irq_profile_names());
    json_array_foreach(json_object_get(json_object_get(props, "hugepages"), "enum"), i, v)
        CHECK_NOTHROW(svm::check_hugepage_mode(json_string_value(v)));
}
