#include "json.hpp"

#include "error.hpp"

namespace svm {

Json json_parse(const std::string& text, const std::string& what) {
    json_error_t err;
    json_t* j = json_loadb(text.data(), text.size(), 0, &err);
    if (!j) SVM_THROW(what + ": invalid JSON at line " + std::to_string(err.line) + ": " + err.text);
    return Json(j);
}

Json json_load_file(const std::string& path) {
    json_error_t err;
    json_t* j = json_load_file(path.c_str(), 0, &err);
    if (!j) SVM_THROW(path + ": line " + std::to_string(err.line) + ": " + err.text);
    return Json(j);
}

std::string json_dump(const json_t* j, bool pretty) {
    char* s = json_dumps(j, pretty ? (JSON_INDENT(2) | JSON_SORT_KEYS) : (JSON_COMPACT | JSON_SORT_KEYS));
    if (!s) SVM_THROW("cannot serialise JSON");
    std::string out(s);
    free(s);
    return out;
}

std::optional<std::string> json_get_string(const json_t* obj, const char* key) {
    json_t* v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return std::nullopt;
    if (!json_is_string(v)) SVM_THROW(std::string("\"") + key + "\" must be a string");
    return std::string(json_string_value(v));
}

std::optional<int64_t> json_get_int(const json_t* obj, const char* key) {
    json_t* v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return std::nullopt;
    if (!json_is_integer(v)) SVM_THROW(std::string("\"") + key + "\" must be an integer");
    return static_cast<int64_t>(json_integer_value(v));
}

std::optional<bool> json_get_bool(const json_t* obj, const char* key) {
    json_t* v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return std::nullopt;
    if (!json_is_boolean(v)) SVM_THROW(std::string("\"") + key + "\" must be true or false");
    return json_is_true(v);
}

std::vector<std::string> json_get_string_array(const json_t* obj, const char* key) {
    std::vector<std::string> out;
    json_t* v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return out;
    if (!json_is_array(v)) SVM_THROW(std::string("\"") + key + "\" must be an array of strings");
    size_t i;
    json_t* e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e)) SVM_THROW(std::string("\"") + key + "\" must be an array of strings");
        out.emplace_back(json_string_value(e));
    }
    return out;
}

JsonIn::JsonIn(const json_t* obj, std::string what) : obj_(obj), what_(std::move(what)) {
    if (!json_is_object(obj)) SVM_THROW(what_ + ": not a JSON object");
}

void JsonIn::fail(const char* key, const std::string& sentence) const {
    SVM_THROW(what_ + ": \"" + key + "\" " + sentence);
}

const json_t* JsonIn::raw(const char* key) {
    seen_.emplace_back(key);
    return json_object_get(obj_, key);
}

const json_t* JsonIn::typed(const char* key, json_type type, const char* type_name) {
    const json_t* v = raw(key);
    if (!v) fail(key, "is missing");
    if (json_typeof(v) != type && !(type == JSON_TRUE && json_is_boolean(v)))
        fail(key, std::string("must be ") + type_name);
    return v;
}

int64_t JsonIn::integer(const char* key) { return json_integer_value(typed(key, JSON_INTEGER, "an integer")); }

void JsonIn::operator()(const char* key, std::string& out) {
    const json_t* v = typed(key, JSON_STRING, "a string");
    out.assign(json_string_value(v), json_string_length(v));
}

void JsonIn::operator()(const char* key, bool& out) { out = json_is_true(typed(key, JSON_TRUE, "true or false")); }

void JsonIn::operator()(const char* key, std::vector<std::string>& out) {
    const json_t* a = typed(key, JSON_ARRAY, "an array of strings");
    out.clear();
    size_t i;
    const json_t* e;
    json_array_foreach(a, i, e) {
        if (!json_is_string(e)) fail(key, "must be an array of strings");
        out.emplace_back(json_string_value(e), json_string_length(e));
    }
}

void JsonIn::operator()(const char* key, std::vector<int>& out) {
    const json_t* a = typed(key, JSON_ARRAY, "an array of integers");
    out.clear();
    size_t i;
    const json_t* e;
    json_array_foreach(a, i, e) {
        json_int_t n = json_integer_value(e);
        if (!json_is_integer(e) || n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max())
            fail(key, "must be an array of integers");
        out.push_back(static_cast<int>(n));
    }
}

void JsonIn::operator()(const char* key, std::map<std::string, std::string>& out) {
    const json_t* o = typed(key, JSON_OBJECT, "an object of strings");
    out.clear();
    const char* k;
    const json_t* v;
    json_object_foreach(const_cast<json_t*>(o), k, v) {
        if (!json_is_string(v)) fail(key, std::string("must be an object of strings (\"") + k + "\" is not)");
        out[k] = std::string(json_string_value(v), json_string_length(v));
    }
}

void JsonIn::done() const {
    const char* k;
    const json_t* v;
    json_object_foreach(const_cast<json_t*>(obj_), k, v) {
        bool known = false;
        for (const auto& s : seen_) known = known || s == k;
        if (!known) SVM_THROW(what_ + ": unknown key \"" + k + "\" (written by a newer release?)");
    }
}

JsonOut::JsonOut() : obj_(json_object()) {}

JsonOut::JsonOut(Json obj) : obj_(std::move(obj)) {
    if (!json_is_object(obj_.get())) SVM_THROW("JsonOut: not a JSON object");
}

void JsonOut::set(const char* key, json_t* v) {
    if (!v || json_object_set_new(obj_.get(), key, v) != 0) SVM_THROW(std::string("cannot write JSON key ") + key);
}

// Text JSON cannot hold (not UTF-8), or that json_parse would not read back
// (a NUL): only a user's value can be (a path, a command line), so the
// user's request is refused rather than the key dropped or cut.
static json_t* text_of(const char* key, const std::string& v) {
    if (v.find('\0') != std::string::npos) SVM_REFUSE(std::string("\"") + key + "\" contains a NUL byte");
    json_t* s = json_stringn(v.data(), v.size());
    if (!s) SVM_REFUSE(std::string("\"") + key + "\" is not valid UTF-8 text");
    return s;
}

void JsonOut::operator()(const char* key, const std::string& v) { set(key, text_of(key, v)); }
void JsonOut::operator()(const char* key, const char* v) { (*this)(key, std::string(v)); }
void JsonOut::operator()(const char* key, bool v) { set(key, json_boolean(v)); }
void JsonOut::operator()(const char* key, Json v) { set(key, v.release()); }

void JsonOut::operator()(const char* key, const std::vector<std::string>& v) {
    Json a(json_array());
    for (const auto& s : v) json_array_append_new(a.get(), text_of(key, s));
    set(key, a.release());
}

void JsonOut::operator()(const char* key, const std::vector<int>& v) {
    Json a(json_array());
    for (int n : v) json_array_append_new(a.get(), json_integer(n));
    set(key, a.release());
}

void JsonOut::operator()(const char* key, const std::map<std::string, std::string>& v) {
    Json o(json_object());
    for (const auto& [k, s] : v) json_object_set_new(o.get(), k.c_str(), text_of(key, s));
    set(key, o.release());
}

}  // namespace svm
