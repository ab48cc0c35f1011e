// The node configuration is checked against etc/*.schema.json when it is
// loaded (lib/base/json_schema.hpp): each keyword the schemas use, the shipped
// example, the device fixtures, and a rule only the schema states.
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

std::string violation(const std::string& schema, const std::string& doc) {
    svm::Json s = svm::json_parse(schema, "schema");
    svm::Json d = svm::json_parse(doc, "doc");
    return reason_of([&] { svm::validate_json(d.get(), s.get(), nullptr); });
}

}  // namespace

TEST_CASE("schema: each keyword refuses what it rules out, naming where", "[schema]") {
    const std::string s = R"({"type": "object", "additionalProperties": false, "required": ["name"],
        "$defs": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
        "properties": {
          "name": {"type": "string", "pattern": "^[a-z]+$"},
          "mode": {"enum": ["on", "off"]},
          "net": {"type": "object", "properties": {"port": {"$ref": "#/$defs/port"}}},
          "list": {"type": "array", "items": {"type": "string"}},
          "map": {"type": "object", "propertyNames": {"not": {"const": "none"}},
                  "additionalProperties": {"type": "integer"}},
          "either": {"oneOf": [{"type": "string"}, {"type": "object"}]}}})";
    CHECK(violation(s, R"({"name": "ok", "mode": "on", "net": {"port": 22}, "list": ["a"], "map": {"x": 1},
                           "either": {}})") == "");
    CHECK(violation(s, R"({})") == "the configuration needs \"name\"");
    CHECK(violation(s, R"({"name": "ok", "extra": 1})") == "the configuration: unknown key \"extra\"");
    CHECK(violation(s, R"({"name": 5})") == "name must be a string");
    CHECK(violation(s, R"({"name": "Bad"})") == "name must match ^[a-z]+$ (it is \"Bad\")");
    CHECK(violation(s, R"({"name": "ok", "mode": "auto"})") ==
          "mode must be one of [\"on\", \"off\"] (it is \"auto\")");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": 0}})") == "net.port must be at least 1 (it is 0)");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": 70000}})") == "net.port must be at most 65535 (it is 70000)");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": "22"}})") == "net.port must be an integer");
    CHECK(violation(s, R"({"name": "ok", "list": ["a", 2]})") == "list[1] must be a string");
    CHECK(violation(s, R"({"name": "ok", "map": {"none": 1}})") == "map: \"none\" is not an allowed name");
    CHECK(violation(s, R"({"name": "ok", "map": {"x": "1"}})") == "map.x must be an integer");
    CHECK(violation(s, R"({"name": "ok", "either": 3})") == "either has the wrong form (it is 3)");
}

TEST_CASE("schema: maxLength bounds a string before any pattern is matched on it", "[schema]") {
    const std::string s = R"({"properties": {"a": {"type": "string", "maxLength": 3, "pattern": "^(a+)+$"}}})";
    CHECK(violation(s, R"({"a": "aaa"})") == "");
    CHECK(violation(s, R"({"a": "abcd"})") == "a must be at most 3 bytes long (it is 4)");
    // A long string never reaches the regular expression (backtracking, recursion).
    CHECK(violation(s, "{\"a\": \"" + std::string(200000, 'a') + "b\"}") ==
          "a must be at most 3 bytes long (it is 200001)");
}

TEST_CASE("schema: a keyword it does not check is refused, not ignored", "[schema]") {
    CHECK(violation(R"({"properties": {"a": {"type": "string", "minLength": 3}}})", R"({"a": "ab"})") ==
          "schema: unsupported keyword minLength");
    CHECK(violation(R"({"$ref": "other.json"})", "{}") == "schema: cannot resolve $ref \"other.json\"");
}

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
