// The node configuration is checked against etc/*.schema.json when it is
// loaded (lib/base/json_schema.hpp): the shipped example, the device
// fixtures, and a rule only the schema states.
#include <set>

#include "catch.hpp"
#include "config.hpp"
#include "fs.hpp"
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

TEST_CASE("schema: it names every key the parser accepts, and the parser every key it names", "[schema]") {
    svm::Json schema = svm::json_load_file(kSource + "/etc/slurm-vm.schema.json");
    for (const char* section : {"", "network", "oci"}) {
        const json_t* props = json_object_get(schema.get(), "properties");
        if (*section) props = json_object_get(json_object_get(props, section), "properties");
        REQUIRE(props);
        std::set<std::string> in_schema;
        const char* key;
        json_t* v;
        json_object_foreach(const_cast<json_t*>(props), key, v) in_schema.insert(key);
        INFO("section \"" << section << "\"");
        CHECK(in_schema == svm::config_keys(section));
    }
}
