// The project's one way to read and write JSON (lib/base/json.hpp): JsonIn
// refuses a key missing, of the wrong type, out of range or unknown with one
// sentence naming it; JsonOut writes what JsonIn reads back; a type's fields
// listed once serve both.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "catch.hpp"
#include "error.hpp"
#include "json.hpp"
#include "pci_address.hpp"
#include "support.hpp"

using svm::test::reason_of;

namespace {

struct Part {
    std::string name;
    int count = 0;
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("name", t.name);
        v("count", t.count);
    }
};

struct Sample {
    std::string text;
    int64_t big = 0;
    uint32_t small = 0;
    uint64_t bits = 0;
    bool flag = false;
    std::vector<std::string> words;
    std::vector<int> numbers;
    std::map<std::string, std::string> attrs;
    svm::PciAddress device;
    std::vector<Part> parts;
    std::string note;  // optional
    template <class V, class T>
    static void fields(V& v, T& t) {
        v("text", t.text);
        v("big", t.big);
        v("small", t.small);
        v("bits", t.bits);
        v("flag", t.flag);
        v("words", t.words);
        v("numbers", t.numbers);
        v("attrs", t.attrs);
        v("device", t.device);
        v.objects("parts", t.parts, [](auto& e, auto& p) { Part::fields(e, p); });
        v.optional("note", t.note);
    }
};

Sample sample() {
    Sample s;
    s.text = "a \"quoted\" text";
    s.big = -(int64_t{1} << 40);
    s.small = 4000000000u;
    s.bits = UINT64_MAX - 1;  // written as a negative integer, read back the same
    s.flag = true;
    s.words = {"one", "two"};
    s.numbers = {-1, 7};
    s.attrs = {{"node", "02:00"}, {"port", ""}};
    s.device = svm::PciAddress::parse("0000:3b:00.1");
    s.parts = {{"gpu", 2}, {"vf", 1}};
    return s;
}

// Reads `text` as a Sample; the refusal's sentence, "" when it reads.
std::string refusal(const std::string& text) {
    return reason_of([&] {
        svm::Json j = svm::json_parse(text, "test");
        svm::from_json_fields<Sample>(j.get(), "sample.json");
    });
}

// The sample's JSON with key set to value (raw JSON), or removed when value is empty.
std::string with(const char* key, const std::string& value) {
    svm::Json j = svm::json_of(sample());
    if (value.empty()) {
        json_object_del(j.get(), key);
    } else {
        svm::Json v = svm::json_parse("[" + value + "]", "value");
        json_object_set(j.get(), key, json_array_get(v.get(), 0));
    }
    return svm::json_dump(j.get());
}

}  // namespace

TEST_CASE("json: a type's fields written and read back the same", "[json]") {
    Sample s = sample();
    std::string once = svm::json_dump(svm::json_of(s).get());
    CHECK(once.find("\"note\"") == std::string::npos);  // optional and empty: not written
    svm::Json back = svm::json_parse(once, "once");
    Sample r = svm::from_json_fields<Sample>(back.get(), "sample.json");
    CHECK(r.text == s.text);
    CHECK(r.big == s.big);
    CHECK(r.small == s.small);
    CHECK(r.bits == s.bits);
    CHECK(r.flag);
    CHECK(r.words == s.words);
    CHECK(r.numbers == s.numbers);
    CHECK(r.attrs == s.attrs);
    CHECK(r.device == s.device);
    REQUIRE(r.parts.size() == 2);
    CHECK(r.parts[1].name == "vf");
    CHECK(r.note.empty());
    CHECK(svm::json_dump(svm::json_of(r).get()) == once);
    r.note = "kept";
    CHECK(svm::from_json_fields<Sample>(svm::json_of(r).get(), "s").note == "kept");
}

TEST_CASE("json: an unknown key is refused by name", "[json]") {
    CHECK(refusal(with("colour", "\"red\"")) == "sample.json: unknown key \"colour\" (written by a newer release?)");
    // In a nested object too, with where it is.
    svm::Json j = svm::json_of(sample());
    json_object_set_new(json_array_get(json_object_get(j.get(), "parts"), 1), "size", json_integer(3));
    CHECK(refusal(svm::json_dump(j.get())) ==
          "sample.json: parts[1]: unknown key \"size\" (written by a newer release?)");
    CHECK(refusal(with("colour", "null")) != "");
}

TEST_CASE("json: a missing key is refused by name, an optional one is not", "[json]") {
    CHECK(refusal(with("text", "")) == "sample.json: \"text\" is missing");
    CHECK(refusal(with("device", "")) == "sample.json: \"device\" is missing");
    CHECK(refusal(with("parts", "")) == "sample.json: \"parts\" is missing");
    CHECK(refusal(with("note", "")) == "");
    CHECK(refusal(with("parts", R"([{"name": "x"}])")) == "sample.json: parts[0]: \"count\" is missing");
}

TEST_CASE("json: a value of the wrong type or out of range is refused by name", "[json]") {
    CHECK(refusal(with("text", "1")) == "sample.json: \"text\" must be a string");
    CHECK(refusal(with("big", "\"1\"")) == "sample.json: \"big\" must be an integer");
    CHECK(refusal(with("big", "1.5")) == "sample.json: \"big\" must be an integer");
    CHECK(refusal(with("flag", "1")) == "sample.json: \"flag\" must be true or false");
    CHECK(refusal(with("text", "null")) == "sample.json: \"text\" must be a string");
    CHECK(refusal(with("small", "-1")) == "sample.json: \"small\" is out of range");
    CHECK(refusal(with("small", "4294967296")) == "sample.json: \"small\" is out of range");
    CHECK(refusal(with("words", R"(["a", 2])")) == "sample.json: \"words\" must be an array of strings");
    CHECK(refusal(with("numbers", "[4294967296]")) == "sample.json: \"numbers\" must be an array of integers");
    CHECK(refusal(with("attrs", R"({"a": 1})")) ==
          "sample.json: \"attrs\" must be an object of strings (\"a\" is not)");
    CHECK(refusal(with("parts", "[1]")) == "sample.json: parts[0]: not a JSON object");
    CHECK(refusal(with("parts", "{}")) == "sample.json: \"parts\" must be an array of objects");
    CHECK(refusal(with("device", "\"3b:00\"")).rfind("sample.json: \"device\" is not valid: ", 0) == 0);
    CHECK(refusal("[]") == "sample.json: not a JSON object");
}

TEST_CASE("json: text JSON cannot hold is the user's, refused by name", "[json]") {
    svm::JsonOut out;
    std::string bad = "/home/u/\xff\xfe";
    CHECK_THROWS_AS(out("workdir", bad), svm::UserError);
    CHECK(reason_of([&] { out("workdir", bad); }) == "\"workdir\" is not valid UTF-8 text");
    CHECK(reason_of([&] {
              out("shares", std::vector<std::string>{"/ok", bad});
          }) == "\"shares\" is not valid UTF-8 text");
    // JSON could hold a NUL (\u0000), but the project's parser refuses it back.
    CHECK(reason_of([&] { out("cmdline", std::string("a\0b", 3)); }) == "\"cmdline\" contains a NUL byte");
    out("fine", "text");
    CHECK(svm::json_dump(out.take().get()) == R"({"fine":"text"})");
}
