#include "json_schema.hpp"

#include <cstdlib>
#include <regex>
#include <set>

#include "error.hpp"
#include "json.hpp"

namespace svm {

namespace {

// Keywords that only describe; every other keyword must be one we check.
const std::set<std::string> kAnnotations = {"$schema",     "$id",     "$defs",   "title",
                                            "description", "default", "comment", "$comment"};
const std::set<std::string> kChecked = {"type",
                                        "enum",
                                        "const",
                                        "minimum",
                                        "maximum",
                                        "pattern",
                                        "properties",
                                        "required",
                                        "propertyNames",
                                        "items",
                                        "oneOf",
                                        "not",
                                        "$ref",
                                        "maxLength",
                                        "if",
                                        "then",
                                        "else",
                                        "dependentRequired",
                                        "additionalProperties"};

constexpr int kMaxDepth = 64;                // schemas nested, $ref included
constexpr size_t kMaxPatternSubject = 1024;  // bytes a pattern is matched on (std::regex recurses per byte)

struct Walk {
    const json_t* root;  // the schema "#/..." refers to
    const SchemaResolver& resolve;
    int depth;
};

// A verdict: "" when the value is valid, else the one sentence saying why not.
using Verdict = std::string;

// A value as it is written, scalars included.
std::string json_text(const json_t* j) {
    char* t = json_dumps(j, JSON_ENCODE_ANY);
    std::string s = t ? t : "?";
    free(t);
    return s;
}

std::string shown(const std::string& path) { return path.empty() ? "the configuration" : path; }

std::string member(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

std::string title_of(const json_t* schema) {
    const char* t = json_string_value(json_object_get(schema, "title"));
    return t ? t : "";
}

// "A", "A or B", "A, B or C".
std::string alternatives(const json_t* values) {
    std::string out;
    size_t n = json_array_size(values);
    for (size_t i = 0; i < n; ++i) {
        if (i > 0) out += i + 1 == n ? " or " : ", ";
        out += json_text(json_array_get(values, i));
    }
    return out;
}

Verdict check(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path);

Verdict check_ref(const json_t* doc, const json_t* ref_value, const Walk& w, const std::string& path) {
    if (!json_is_string(ref_value)) SVM_THROW("schema: $ref must be a string");
    std::string ref = json_string_value(ref_value);
    if (ref.rfind("#/$defs/", 0) == 0) {
        const json_t* def = json_object_get(json_object_get(w.root, "$defs"), ref.substr(8).c_str());
        if (!def) SVM_THROW("schema: no definition " + ref);
        return check(doc, def, w, path);
    }
    const json_t* other = w.resolve ? w.resolve(ref) : nullptr;
    if (!other) SVM_THROW("schema: cannot resolve $ref \"" + ref + "\"");
    return check(doc, other, Walk{other, w.resolve, w.depth}, path);
}

Verdict check_type(const json_t* doc, const json_t* schema, const std::string& path) {
    const json_t* t = json_object_get(schema, "type");
    if (!t) return "";
    if (!json_is_string(t)) SVM_THROW("schema: type must be a string");
    static const std::pair<const char*, const char*> kTypes[] = {
        {"object", "an object"}, {"array", "an array"},        {"string", "a string"}, {"integer", "an integer"},
        {"number", "a number"},  {"boolean", "true or false"}, {"null", "null"}};
    const std::string type = json_string_value(t);
    for (const auto& [name, noun] : kTypes) {
        if (type != name) continue;
        bool ok = type == "object"    ? json_is_object(doc)
                  : type == "array"   ? json_is_array(doc)
                  : type == "string"  ? json_is_string(doc)
                  : type == "integer" ? json_is_integer(doc)
                  : type == "number"  ? json_is_number(doc)
                  : type == "boolean" ? json_is_boolean(doc)
                                      : json_is_null(doc);
        return ok ? "" : shown(path) + " must be " + noun;
    }
    SVM_THROW("schema: unknown type \"" + type + "\"");
}

// enum, const: the title when there is one, else the values allowed.
Verdict check_values(const json_t* doc, const json_t* schema, const std::string& path) {
    std::string title = title_of(schema), it = " (it is " + json_text(doc) + ")";
    if (const json_t* e = json_object_get(schema, "enum")) {
        if (!json_is_array(e)) SVM_THROW("schema: enum must be an array");
        size_t i;
        json_t* v;
        bool found = false;
        json_array_foreach(e, i, v) found = found || json_equal(v, const_cast<json_t*>(doc));
        if (!found) return shown(path) + " must be " + (title.empty() ? alternatives(e) : title) + it;
    }
    if (const json_t* c = json_object_get(schema, "const"))
        if (!json_equal(const_cast<json_t*>(c), const_cast<json_t*>(doc)))
            return shown(path) + " must be " + (title.empty() ? json_text(c) : title) + it;
    return "";
}

Verdict check_number(const json_t* doc, const json_t* schema, const std::string& path) {
    if (!json_is_number(doc)) return "";
    double v = json_number_value(doc);
    std::string it = " (it is " + json_text(doc) + ")";
    if (const json_t* m = json_object_get(schema, "minimum"); m && v < json_number_value(m))
        return shown(path) + " must be at least " + json_text(m) + it;
    if (const json_t* m = json_object_get(schema, "maximum"); m && v > json_number_value(m))
        return shown(path) + " must be at most " + json_text(m) + it;
    return "";
}

// maxLength, then pattern: a regular expression only ever sees a bounded string.
Verdict check_string(const json_t* doc, const json_t* schema, const std::string& path) {
    if (!json_is_string(doc)) return "";
    size_t len = json_string_length(doc);
    std::string long_by = " bytes long (it is " + std::to_string(len) + ")";
    if (const json_t* m = json_object_get(schema, "maxLength"); m && len > static_cast<size_t>(json_integer_value(m)))
        return shown(path) + " must be at most " + json_text(m) + long_by;
    const json_t* p = json_object_get(schema, "pattern");
    if (!p) return "";
    if (!json_is_string(p)) SVM_THROW("schema: pattern must be a string");
    if (len > kMaxPatternSubject)
        return shown(path) + " must be at most " + std::to_string(kMaxPatternSubject) + long_by;
    std::regex re;
    try {
        re = std::regex(json_string_value(p));
    } catch (const std::regex_error&) {
        SVM_THROW(std::string("schema: pattern ") + json_string_value(p) + " is not a regular expression");
    }
    if (std::regex_search(std::string(json_string_value(doc), len), re)) return "";
    std::string title = title_of(schema);
    return shown(path) + " must " + (title.empty() ? "match " + std::string(json_string_value(p)) : "be " + title) +
           " (it is " + json_text(doc) + ")";
}

// required, dependentRequired: a missing key, with its title (what it is for).
Verdict check_present(const json_t* doc, const json_t* schema, const std::string& path) {
    const json_t* props = json_object_get(schema, "properties");
    size_t i;
    json_t* req;
    json_array_foreach(json_object_get(schema, "required"), i, req) {
        const char* key = json_string_value(req);
        if (!key) SVM_THROW("schema: required must list strings");
        if (json_object_get(doc, key)) continue;
        std::string title = title_of(json_object_get(props, key));
        return shown(path) + " needs \"" + key + "\"" + (title.empty() ? "" : " (" + title + ")");
    }
    const char* key;
    json_t* needs;
    json_object_foreach(json_object_get(schema, "dependentRequired"), key, needs) {
        if (!json_object_get(doc, key)) continue;
        json_array_foreach(needs, i, req) {
            const char* other = json_string_value(req);
            if (!other) SVM_THROW("schema: dependentRequired must list strings");
            if (!json_object_get(doc, other)) return shown(path) + ": \"" + key + "\" needs \"" + other + "\"";
        }
    }
    return "";
}

Verdict check_members(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path) {
    const json_t* props = json_object_get(schema, "properties");
    const json_t* extra = json_object_get(schema, "additionalProperties");
    const json_t* names = json_object_get(schema, "propertyNames");
    const char* key;
    json_t* v;
    json_object_foreach(const_cast<json_t*>(doc), key, v) {
        if (names) {
            Json name(json_string(key));
            if (!check(name.get(), names, w, "").empty()) {
                std::string title = title_of(names);
                return shown(path) + ": \"" + key + "\" is not " + (title.empty() ? "an allowed name" : title);
            }
        }
        Verdict bad;
        if (const json_t* p = json_object_get(props, key)) bad = check(v, p, w, member(path, key));
        else if (json_is_false(extra)) bad = shown(path) + ": unknown key \"" + key + "\"";
        else if (json_is_object(extra)) bad = check(v, extra, w, member(path, key));
        if (!bad.empty()) return bad;
    }
    return "";
}

Verdict check_items(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path) {
    const json_t* items = json_object_get(schema, "items");
    if (!items || !json_is_array(doc)) return "";
    size_t i;
    json_t* v;
    json_array_foreach(doc, i, v) {
        Verdict bad = check(v, items, w, shown(path) + "[" + std::to_string(i) + "]");
        if (!bad.empty()) return bad;
    }
    return "";
}

// oneOf: exactly one branch holds. When none does and one alone is of the
// value's type, what that branch refuses is the most precise sentence.
Verdict check_one_of(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path) {
    const json_t* one = json_object_get(schema, "oneOf");
    if (!one) return "";
    size_t i, matched = 0, typed = 0;
    json_t* s;
    Verdict typed_refusal;
    json_array_foreach(one, i, s) {
        Verdict bad = check(doc, s, w, path);
        matched += bad.empty() ? 1 : 0;
        if (!bad.empty() && json_object_get(s, "type") && check_type(doc, s, path).empty()) {
            ++typed;
            typed_refusal = bad;
        }
    }
    if (matched == 1) return "";
    if (matched == 0 && typed == 1) return typed_refusal;
    std::string title = title_of(schema);
    return shown(path) + (title.empty() ? " has the wrong form" : " must be " + title) + " (it is " + json_text(doc) +
           ")";
}

// oneOf, not, if/then/else: the branches a value is tried against.
Verdict check_branches(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path) {
    if (Verdict bad = check_one_of(doc, schema, w, path); !bad.empty()) return bad;
    if (const json_t* n = json_object_get(schema, "not"); n && check(doc, n, w, path).empty())
        return shown(path) + " must not be " + json_text(doc);
    if (const json_t* cond = json_object_get(schema, "if")) {
        bool holds = check(doc, cond, w, path).empty();
        const json_t* branch = json_object_get(schema, holds ? "then" : "else");
        Verdict bad = branch ? check(doc, branch, w, path) : "";
        std::string title = title_of(cond);
        if (holds && !bad.empty() && !title.empty()) bad += " " + title;
        return bad;
    }
    return "";
}

Verdict check(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path) {
    if (!json_is_object(schema)) SVM_THROW("schema: a schema must be an object (at " + shown(path) + ")");
    if (w.depth >= kMaxDepth)
        SVM_THROW("schema: nested more than " + std::to_string(kMaxDepth) + " levels deep (at " + shown(path) + ")");
    const char* kw;
    json_t* unused;
    json_object_foreach(const_cast<json_t*>(schema), kw, unused) {
        if (!kChecked.count(kw) && !kAnnotations.count(kw)) SVM_THROW(std::string("schema: unsupported keyword ") + kw);
    }
    Walk inner{w.root, w.resolve, w.depth + 1};
    Verdict bad;
    if (const json_t* r = json_object_get(schema, "$ref")) bad = check_ref(doc, r, inner, path);
    if (bad.empty()) bad = check_type(doc, schema, path);
    if (bad.empty()) bad = check_values(doc, schema, path);
    if (bad.empty()) bad = check_number(doc, schema, path);
    if (bad.empty()) bad = check_string(doc, schema, path);
    if (bad.empty() && json_is_object(doc)) bad = check_present(doc, schema, path);
    if (bad.empty() && json_is_object(doc)) bad = check_members(doc, schema, inner, path);
    if (bad.empty()) bad = check_items(doc, schema, inner, path);
    if (bad.empty()) bad = check_branches(doc, schema, inner, path);
    return bad;
}

}  // namespace

void validate_json(const json_t* doc, const json_t* schema, const SchemaResolver& resolve, const std::string& at) {
    Verdict bad = check(doc, schema, Walk{schema, resolve, 0}, at);
    if (!bad.empty()) SVM_THROW(bad);
}

void read_valid(const json_t* obj, const char* key, std::string& out) {
    if (const json_t* v = json_object_get(obj, key); json_is_string(v))
        out.assign(json_string_value(v), json_string_length(v));
}

void read_valid(const json_t* obj, const char* key, int& out) {
    if (const json_t* v = json_object_get(obj, key); json_is_integer(v)) out = static_cast<int>(json_integer_value(v));
}

void read_valid(const json_t* obj, const char* key, int64_t& out) {
    if (const json_t* v = json_object_get(obj, key); json_is_integer(v)) out = json_integer_value(v);
}

void read_valid(const json_t* obj, const char* key, bool& out) {
    if (const json_t* v = json_object_get(obj, key); json_is_boolean(v)) out = json_is_true(v);
}

void read_valid(const json_t* obj, const char* key, std::vector<std::string>& out) {
    const json_t* a = json_object_get(obj, key);
    if (!json_is_array(a)) return;
    out.clear();
    size_t i;
    json_t* e;
    json_array_foreach(a, i, e) out.emplace_back(json_string_value(e) ? json_string_value(e) : "");
}

}  // namespace svm
