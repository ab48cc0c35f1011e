// JSON Schema (lib/base/json_schema.hpp): each keyword the node
// configuration's schemas use (the schemas themselves: job/tests/test_config_schema.cpp).
#include <string>

#include "catch.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "json_schema.hpp"
#include "support.hpp"

using svm::test::reason_of;

namespace {

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
