// RAII and small helpers around jansson.
#pragma once
#include <jansson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace svm {

struct JsonDeleter {
    void operator()(json_t* j) const { json_decref(j); }
};
using Json = std::unique_ptr<json_t, JsonDeleter>;

// Takes a new reference (for borrowed pointers).
inline Json json_ref(json_t* j) { return Json(json_incref(j)); }

Json json_parse(const std::string& text, const std::string& what);
Json json_load_file(const std::string& path);
std::string json_dump(const json_t* j, bool pretty = false);

// Typed getters on an object; throw svm::Error naming the key when the type is wrong.
std::optional<std::string> json_get_string(const json_t* obj, const char* key);
std::optional<int64_t> json_get_int(const json_t* obj, const char* key);
std::optional<bool> json_get_bool(const json_t* obj, const char* key);
std::vector<std::string> json_get_string_array(const json_t* obj, const char* key);

}  // namespace svm
