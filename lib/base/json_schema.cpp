#include "json_schema.hpp"

#include <cstdlib>
#include <regex>
#include <set>

#include "error.hpp"
#include "json.hpp"

namespace svm {

namespace {

// Keywords that only describe; every other keyword must be one we check.
const std::set<std::string> kAnnotations = {"$schema", "$id", "$defs", "title", "description", "default", "comment"};
const std::set<std::string> kChecked = {
    "type",     "enum",          "const", "minimum", "maximum", "pattern", "properties", "additionalProperties",
    "required", "propertyNames", "items", "oneOf",   "not",     "$ref",    "maxLength"};

struct Walk {
    const json_t* root;  // the schema "#/..." refers to
    const SchemaResolver& resolve;
};

// A value as it is written, scalars included.
std::string json_text(const json_t* j) {
    char* t = json_dumps(j, JSON_ENCODE_ANY);
    std::string s = t ? t : "?";
    free(t);
    return s;
}

std::string shown(const std::string& path) { return path.empty() ? "the configuration" : path; }

std::string member(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

void check(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path);

bool valid(const json_t* doc, const json_t* schema, const Walk& w) {
    try {
        check(doc, schema, w, "");
        return true;
    } catch (const Error&) {
        return false;
    }
}

bool has_type(const json_t* doc, const std::string& type) {
    if (type == "object") return json_is_object(doc);
    if (type == "array") return json_is_array(doc);
    if (type == "string") return json_is_string(doc);
    if (type == "integer") return json_is_integer(doc);
    if (type == "number") return json_is_number(doc);
    if (type == "boolean") return json_is_boolean(doc);
    if (type == "null") return json_is_null(doc);
    SVM_THROW("schema: unknown type \"" + type + "\"");
}

const char* article(const std::string& type) {
    return type == "integer" || type == "object" || type == "array" ? "an" : "a";
}

void check_ref(const json_t* doc, const std::string& ref, const Walk& w, const std::string& path) {
    if (ref.rfind("#/$defs/", 0) == 0) {
        const json_t* def = json_object_get(json_object_get(w.root, "$defs"), ref.substr(8).c_str());
        if (!def) SVM_THROW("schema: no definition " + ref);
        return check(doc, def, w, path);
    }
    const json_t* other = w.resolve ? w.resolve(ref) : nullptr;
    if (!other) SVM_THROW("schema: cannot resolve $ref \"" + ref + "\"");
    check(doc, other, Walk{other, w.resolve}, path);
}

void check_scalar(const json_t* doc, const json_t* schema, const std::string& path) {
    std::string where = shown(path);
    if (const json_t* t = json_object_get(schema, "type"))
        if (!has_type(doc, json_string_value(t)))
            SVM_THROW(where + " must be " + article(json_string_value(t)) + " " + json_string_value(t));
    if (const json_t* e = json_object_get(schema, "enum")) {
        size_t i;
        json_t* v;
        bool found = false;
        json_array_foreach(e, i, v) found = found || json_equal(v, const_cast<json_t*>(doc));
        if (!found) SVM_THROW(where + " must be one of " + json_text(e) + " (it is " + json_text(doc) + ")");
    }
    if (const json_t* c = json_object_get(schema, "const"))
        if (!json_equal(const_cast<json_t*>(c), const_cast<json_t*>(doc)))
            SVM_THROW(where + " must be " + json_text(c));
    if (json_is_number(doc)) {
        double v = json_number_value(doc);
        if (const json_t* m = json_object_get(schema, "minimum"); m && v < json_number_value(m))
            SVM_THROW(where + " must be at least " + json_text(m) + " (it is " + json_text(doc) + ")");
        if (const json_t* m = json_object_get(schema, "maximum"); m && v > json_number_value(m))
            SVM_THROW(where + " must be at most " + json_text(m) + " (it is " + json_text(doc) + ")");
    }
    // Before any pattern: a regular expression is matched on bounded strings only.
    if (const json_t* m = json_object_get(schema, "maxLength"); m && json_is_string(doc))
        if (json_string_length(doc) > static_cast<size_t>(json_integer_value(m)))
            SVM_THROW(where + " must be at most " + json_text(m) + " bytes long (it is " +
                      std::to_string(json_string_length(doc)) + ")");
    if (const json_t* p = json_object_get(schema, "pattern"); p && json_is_string(doc))
        if (!std::regex_search(json_string_value(doc), std::regex(json_string_value(p))))
            SVM_THROW(where + " must match " + json_string_value(p) + " (it is " + json_text(doc) + ")");
}

void check_object(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path) {
    const json_t* props = json_object_get(schema, "properties");
    const json_t* extra = json_object_get(schema, "additionalProperties");
    const json_t* names = json_object_get(schema, "propertyNames");
    size_t i;
    json_t* req;
    json_array_foreach(json_object_get(schema, "required"), i, req) if (!json_object_get(doc, json_string_value(req)))
        SVM_THROW(shown(path) + " needs \"" + json_string_value(req) + "\"");
    const char* key;
    json_t* v;
    json_object_foreach(const_cast<json_t*>(doc), key, v) {
        json_t* name = json_string(key);
        bool name_ok = !names || valid(name, names, w);
        json_decref(name);
        if (!name_ok) SVM_THROW(shown(path) + ": \"" + key + "\" is not an allowed name");
        if (const json_t* p = json_object_get(props, key)) {
            check(v, p, w, member(path, key));
        } else if (json_is_false(extra)) {
            SVM_THROW(shown(path) + ": unknown key \"" + key + "\"");
        } else if (json_is_object(extra)) {
            check(v, extra, w, member(path, key));
        }
    }
}

void check(const json_t* doc, const json_t* schema, const Walk& w, const std::string& path) {
    const char* kw;
    json_t* unused;
    json_object_foreach(const_cast<json_t*>(schema), kw, unused) {
        if (!kChecked.count(kw) && !kAnnotations.count(kw)) SVM_THROW(std::string("schema: unsupported keyword ") + kw);
    }
    if (const json_t* r = json_object_get(schema, "$ref")) check_ref(doc, json_string_value(r), w, path);
    check_scalar(doc, schema, path);
    if (json_is_object(doc)) check_object(doc, schema, w, path);
    if (const json_t* items = json_object_get(schema, "items"); items && json_is_array(doc)) {
        size_t i;
        json_t* v;
        json_array_foreach(doc, i, v) check(v, items, w, shown(path) + "[" + std::to_string(i) + "]");
    }
    if (const json_t* one = json_object_get(schema, "oneOf")) {
        size_t i, matched = 0;
        json_t* s;
        json_array_foreach(one, i, s) matched += valid(doc, s, w) ? 1 : 0;
        if (matched != 1) SVM_THROW(shown(path) + " has the wrong form (it is " + json_text(doc) + ")");
    }
    if (const json_t* n = json_object_get(schema, "not"); n && valid(doc, n, w))
        SVM_THROW(shown(path) + " must not be " + json_text(doc));
}

}  // namespace

void validate_json(const json_t* doc, const json_t* schema, const SchemaResolver& resolve) {
    check(doc, schema, Walk{schema, resolve}, "");
}

}  // namespace svm
