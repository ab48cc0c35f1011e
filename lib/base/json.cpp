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

}  // namespace svm
