// JSON Schema validation over jansson, for the project's own schemas
// (etc/*.schema.json), which the node configuration is checked against when
// it is loaded (config.hpp: validate_node_config). It implements the keywords those schemas use: type, enum,
// const, minimum, maximum, maxLength (bytes; checked before pattern), pattern, properties, additionalProperties,
// required, propertyNames, items, oneOf, not, and $ref to a sibling schema or
// to "#/$defs/NAME". A schema that uses another keyword is refused, so that
// a rule cannot be written down and silently not enforced.
#pragma once
#include <jansson.h>

#include <functional>
#include <string>

namespace svm {

// The root of a schema named by a $ref to a file ("x.schema.json"); nullptr
// when unknown.
using SchemaResolver = std::function<const json_t*(const std::string& name)>;

// Throws svm::Error naming the first violation and where it is, e.g.
// "network.mtu must be at least 576 (it is 100)".
void validate_json(const json_t* doc, const json_t* schema, const SchemaResolver& resolve);

}  // namespace svm
