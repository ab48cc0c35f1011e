// JSON Schema validation over jansson, for the project's own schemas
// (etc/*.schema.json): the node configuration is checked against them before
// any of its values is read (config.hpp: validate_node_config), and so is a
// VM record read back from Slurm. It implements the keywords those schemas
// use: type, enum, const, minimum, maximum, maxLength (bytes; checked before
// pattern), pattern, properties, additionalProperties, required,
// dependentRequired, propertyNames, items, oneOf, not, if/then/else, and $ref
// to a sibling schema or to "#/$defs/NAME". A schema that uses another keyword
// is refused, so that a rule cannot be written down and silently not enforced.
//
// Each refusal is one sentence naming the key path ("network.mtu must be at
// least 576 (it is 100)"). A schema's "title" names what its value must be
// and is said when a value fails its enum, const, pattern or oneOf ("log_dir
// must be an absolute path (it is \"var\")"), when a propertyNames schema
// refuses a key, and when a required key is missing ("images.a needs \"path\"
// (the disk image on the nodes)"); an "if" schema's title ends a refusal by
// its "then" ("... for fabric \"ipoib\""). When no branch of a oneOf holds
// and one alone has the value's type, what that branch refuses is said
// instead ("network.underlay.n1 must be an IPv4 address ...").
//
// Bounds: a pattern is matched on strings of at most 4096 bytes (a longer one
// is refused as too long, whatever maxLength says), and schemas nest at most
// 64 levels deep ($ref included), so a cycle of $refs is an error, not a loop.
#pragma once
#include <jansson.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace svm {

// The root of a schema named by a $ref to a file ("x.schema.json"); nullptr
// when unknown.
using SchemaResolver = std::function<const json_t*(const std::string& name)>;

// Throws svm::Error naming the first violation and where it is, e.g.
// "network.mtu must be at least 576 (it is 100)"; a fault of the schema
// itself is an Error that starts with "schema: ". `at` is the key path of
// doc in a larger document ("devices"), "" for a whole one.
void validate_json(const json_t* doc, const json_t* schema, const SchemaResolver& resolve, const std::string& at = "");

// Reading a document validate_json accepted: its schema settled each value's
// type and range, so these check nothing; each copies obj's member key into
// out when it is there and leaves out as it is when it is not.
void read_valid(const json_t* obj, const char* key, std::string& out);
void read_valid(const json_t* obj, const char* key, int& out);
void read_valid(const json_t* obj, const char* key, int64_t& out);
void read_valid(const json_t* obj, const char* key, bool& out);
void read_valid(const json_t* obj, const char* key, std::vector<std::string>& out);

}  // namespace svm
