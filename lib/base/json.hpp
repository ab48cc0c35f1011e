// The project's one way to read and write JSON, over jansson: RAII for
// json_t, and JsonIn / JsonOut, which read and write one object field by
// field. JsonIn is strict: a key missing, of the wrong type or out of range,
// and (done()) a key nobody read are refused with one sentence naming the key
// ("plan.json: \"uid\" is missing"). A type's fields can be listed once, as a
// function template over JsonIn and JsonOut alike (see JobPlan, the ledger's
// records).
#pragma once
#include <jansson.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "error.hpp"

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

// Typed getters on an object, lenient about absent and unknown keys; throw
// svm::Error naming the key when the type is wrong. For documents that are
// checked against a schema first (the configuration) or that others write
// with keys of their own (qemu-img's output, OCI manifests); the project's
// own records and plans use JsonIn.
std::optional<std::string> json_get_string(const json_t* obj, const char* key);
std::optional<int64_t> json_get_int(const json_t* obj, const char* key);
std::optional<bool> json_get_bool(const json_t* obj, const char* key);
std::vector<std::string> json_get_string_array(const json_t* obj, const char* key);

// Reads one JSON object strictly; `what` starts every error ("plan.json",
// "ledger record \"vfio_bind\""). Each read names a key, which is then known
// to done().
class JsonIn {
public:
    JsonIn(const json_t* obj, std::string what);

    void operator()(const char* key, std::string& out);
    void operator()(const char* key, bool& out);
    void operator()(const char* key, std::vector<std::string>& out);
    void operator()(const char* key, std::vector<int>& out);
    void operator()(const char* key, std::map<std::string, std::string>& out);
    // Integers: range-checked for types narrower than 64 bits; 64-bit ones
    // take the value's bits (an unsigned written by JsonOut reads back).
    template <class I>
    std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>> operator()(const char* key, I& out) {
        int64_t v = integer(key);
        if constexpr (sizeof(I) < sizeof(int64_t)) {
            if (v < static_cast<int64_t>(std::numeric_limits<I>::min()) ||
                v > static_cast<int64_t>(std::numeric_limits<I>::max()))
                fail(key, "is out of range");
        }
        out = static_cast<I>(v);
    }
    // A value type with T::parse(text) (throwing svm::Error) and str().
    template <class T>
    auto operator()(const char* key, T& out) -> decltype(out = T::parse(std::string()), void()) {
        std::string text;
        (*this)(key, text);
        try {
            out = T::parse(text);
        } catch (const Error& e) {
            fail(key, "is not valid: " + e.reason());
        }
    }
    // An array of objects, each read with fields(JsonIn&, T&) and done().
    template <class T, class Fields>
    void objects(const char* key, std::vector<T>& out, Fields fields) {
        const json_t* a = typed(key, JSON_ARRAY, "an array of objects");
        out.clear();
        out.resize(json_array_size(a));
        for (size_t i = 0; i < out.size(); ++i) {
            JsonIn e(json_array_get(a, i), what_ + ": " + key + "[" + std::to_string(i) + "]");
            fields(e, out[i]);
            e.done();
        }
    }
    // A key that may be absent (records of earlier releases): out is kept then.
    template <class T>
    void optional(const char* key, T& out) {
        if (json_object_get(obj_, key)) (*this)(key, out);
        else seen_.emplace_back(key);
    }
    template <class T, class Fields>
    void optional_objects(const char* key, std::vector<T>& out, Fields fields) {
        if (json_object_get(obj_, key)) objects(key, out, fields);
        else seen_.emplace_back(key);
    }
    // The value at key, of any type, as it is; nullptr when absent.
    const json_t* raw(const char* key);
    // Refuses the first key of the object that no read named.
    void done() const;
    // Throws "<what>: \"key\" <sentence>".
    [[noreturn]] void fail(const char* key, const std::string& sentence) const;
    const std::string& what() const { return what_; }

private:
    int64_t integer(const char* key);
    const json_t* typed(const char* key, json_type type, const char* type_name);
    const json_t* obj_;
    std::string what_;
    std::vector<std::string> seen_;
};

// Writes one JSON object: out("key", value) for each field, then take().
class JsonOut {
public:
    JsonOut();
    explicit JsonOut(Json obj);  // adds to an object written earlier

    void operator()(const char* key, const std::string& v);
    void operator()(const char* key, const char* v);
    void operator()(const char* key, bool v);
    void operator()(const char* key, const std::vector<std::string>& v);
    void operator()(const char* key, const std::vector<int>& v);
    void operator()(const char* key, const std::map<std::string, std::string>& v);
    void operator()(const char* key, Json v);
    template <class I>
    std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>> operator()(const char* key, I v) {
        set(key, json_integer(static_cast<json_int_t>(v)));
    }
    template <class T>
    auto operator()(const char* key, const T& v) -> decltype(v.str(), void()) {
        (*this)(key, v.str());
    }
    template <class T, class Fields>
    void objects(const char* key, const std::vector<T>& v, Fields fields) {
        Json a(json_array());
        for (const auto& e : v) {
            JsonOut o;
            fields(o, e);
            json_array_append_new(a.get(), o.take().release());
        }
        (*this)(key, std::move(a));
    }
    // null when absent (or, nullable(), when the type's empty value).
    template <class T>
    void operator()(const char* key, const std::optional<T>& v) {
        if (v) (*this)(key, *v);
        else (*this)(key, Json(json_null()));
    }
    template <class T>
    void nullable(const char* key, const T& v) {
        if (v == T{}) (*this)(key, Json(json_null()));
        else (*this)(key, v);
    }
    // Written only when not the type's empty value (what optional() keeps).
    template <class T>
    void optional(const char* key, const T& v) {
        if (!(v == T{})) (*this)(key, v);
    }
    template <class T, class Fields>
    void optional_objects(const char* key, const std::vector<T>& v, Fields fields) {
        if (!v.empty()) objects(key, v, fields);
    }
    Json take() { return std::move(obj_); }

private:
    void set(const char* key, json_t* v);
    Json obj_;
};

// A type whose fields are listed once as `template <class V, class T> static
// void fields(V&, T&)`: written, and read strictly (what: the sentence's start).
template <class T>
Json json_of(const T& t) {
    JsonOut out;
    T::fields(out, t);
    return out.take();
}
template <class T>
T from_json_fields(const json_t* obj, std::string what) {
    JsonIn in(obj, std::move(what));
    T t;
    T::fields(in, t);
    in.done();
    return t;
}

}  // namespace svm
