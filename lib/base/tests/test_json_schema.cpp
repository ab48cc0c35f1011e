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

std::string violation(const std::string& schema, const std::string& doc, const std::string& at = "") {
    svm::Json s = svm::json_parse(schema, "schema");
    svm::Json d = svm::json_parse(doc, "doc");
    return reason_of([&] { svm::validate_json(d.get(), s.get(), nullptr, at); });
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
    CHECK(violation(s, R"({"name": "ok", "mode": "auto"})") == "mode must be \"on\" or \"off\" (it is \"auto\")");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": 0}})") == "net.port must be at least 1 (it is 0)");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": 70000}})") == "net.port must be at most 65535 (it is 70000)");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": "22"}})") == "net.port must be an integer");
    CHECK(violation(s, R"({"name": "ok", "list": ["a", 2]})") == "list[1] must be a string");
    CHECK(violation(s, R"({"name": "ok", "map": {"none": 1}})") == "map: \"none\" is not an allowed name");
    CHECK(violation(s, R"({"name": "ok", "map": {"x": "1"}})") == "map.x must be an integer");
    CHECK(violation(s, R"({"name": "ok", "either": 3})") == "either has the wrong form (it is 3)");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": true}})") == "net.port must be an integer");
    CHECK(violation(s, R"({"name": "ok", "mode": "on"})", "outer") == "");
    CHECK(violation(s, R"({"name": "ok", "net": {"port": 0}})", "outer") ==
          "outer.net.port must be at least 1 (it is 0)");
    CHECK(violation(R"({"type": "boolean"})", "[1]", "flag") == "flag must be true or false");
}

TEST_CASE("schema: a title says what the value must be, in place of the rule", "[schema]") {
    const std::string s = R"({"$defs": {"path": {"title": "an absolute path", "type": "string", "pattern": "^/"}},
        "properties": {
          "dir": {"$ref": "#/$defs/path"},
          "size": {"title": "a power of two", "enum": [1, 2, 4]},
          "one": {"title": "a name or a list", "oneOf": [{"type": "string"}, {"type": "array"}]},
          "map": {"propertyNames": {"title": "a lower-case name", "pattern": "^[a-z]+$"}},
          "entry": {"required": ["path"], "properties": {"path": {"$ref": "#/$defs/path",
                                                                   "title": "the disk image"}}}}})";
    CHECK(violation(s, R"({"dir": "/x", "size": 4, "one": [], "map": {"ab": 1}, "entry": {"path": "/i"}})") == "");
    CHECK(violation(s, R"({"dir": "x"})") == "dir must be an absolute path (it is \"x\")");
    CHECK(violation(s, R"({"size": 3})") == "size must be a power of two (it is 3)");
    CHECK(violation(s, R"({"one": 5})") == "one must be a name or a list (it is 5)");
    // No branch holds, one alone is of the value's type: its refusal is the precise one.
    const std::string typed = R"({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]})";
    CHECK(violation(typed, R"([1, "x"])", "list") == "list[1] must be an integer");
    CHECK(violation(typed, R"({})", "list") == "list has the wrong form (it is {})");
    CHECK(violation(s, R"({"map": {"Ab": 1}})") == "map: \"Ab\" is not a lower-case name");
    CHECK(violation(s, R"({"entry": {}})") == "entry needs \"path\" (the disk image)");
    CHECK(violation(s, R"({"entry": {"path": "i"}})") == "entry.path must be an absolute path (it is \"i\")");
}

TEST_CASE("schema: dependentRequired, a key that needs another", "[schema]") {
    const std::string s = R"({"properties": {"img": {"dependentRequired": {"initrd": ["kernel"], "a": ["b", "c"]}}}})";
    CHECK(violation(s, R"({"img": {"kernel": "k", "initrd": "i"}})") == "");
    CHECK(violation(s, R"({"img": {"kernel": "k"}})") == "");
    CHECK(violation(s, R"({"img": {"initrd": "i"}})") == "img: \"initrd\" needs \"kernel\"");
    CHECK(violation(s, R"({"img": {"a": 1, "b": 2}})") == "img: \"a\" needs \"c\"");
    CHECK(violation(R"({"dependentRequired": {"a": [1]}})", R"({"a": 1})") ==
          "schema: dependentRequired must list strings");
}

TEST_CASE("schema: if with then or else, a refusal by then ends with the if title", "[schema]") {
    const std::string s = R"({"properties": {"net": {
        "if": {"title": "for fabric \"ipoib\"", "required": ["fabric"], "properties": {"fabric": {"const": "ipoib"}}},
        "then": {"required": ["prefix"], "properties": {"prefix": {"title": "an IPv4 /16"}}},
        "else": {"properties": {"prefix": {"type": "string"}}}}}})";
    CHECK(violation(s, R"({"net": {"fabric": "ipoib", "prefix": "10.1.0.0/16"}})") == "");
    CHECK(violation(s, R"({"net": {"fabric": "segment"}})") == "");
    CHECK(violation(s, R"({"net": {}})") == "");
    CHECK(violation(s, R"({"net": {"fabric": "ipoib"}})") == "net needs \"prefix\" (an IPv4 /16) for fabric \"ipoib\"");
    CHECK(violation(s, R"({"net": {"fabric": "segment", "prefix": 5}})") == "net.prefix must be a string");
    // then and else without if decide nothing (as the standard has it).
    CHECK(violation(R"({"then": {"type": "string"}})", "[5]") == "");
}

TEST_CASE("schema: bounded: $ref cycles and deep nesting stop, long strings meet no pattern", "[schema]") {
    CHECK_THAT(violation(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})", "[1]"),
               Catch::StartsWith("schema: nested more than 64 levels deep"));
    const std::string list =
        R"({"$defs": {"l": {"type": "array", "items": {"$ref": "#/$defs/l"}}}, "$ref": "#/$defs/l"})";
    CHECK(violation(list, std::string(20, '[') + std::string(20, ']')) == "");
    CHECK_THAT(violation(list, std::string(100, '[') + std::string(100, ']')),
               Catch::StartsWith("schema: nested more than 64 levels deep"));
    const std::string s = R"({"properties": {"a": {"type": "string", "pattern": "^(a|b)*$"}}})";
    CHECK(violation(s, "{\"a\": \"" + std::string(1024, 'a') + "\"}") == "");
    CHECK(violation(s, "{\"a\": \"" + std::string(1025, 'a') + "\"}") ==
          "a must be at most 1024 bytes long (it is 1025)");
    CHECK(violation(R"({"items": {"pattern": "("}})", R"(["x"])") == "schema: pattern ( is not a regular expression");
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
