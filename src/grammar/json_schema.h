// JSON Schema -> grammar text (grammar.h), for the subset OpenAI's strict structured outputs allow:
// type (one or a list), object properties/required/additionalProperties:false, enum, const, array
// items/minItems/maxItems, string minLength/maxLength/pattern/format, integer minimum/maximum and
// their exclusive forms, number (bounds of integer value), boolean, null, anyOf, $defs/definitions with local $ref (recursive references allowed). Annotations
// (title, description, $schema, $id, $comment, default, examples) are ignored. Any other keyword
// is refused with an error naming it and where it is.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "base/status.h"

namespace hz::grammar {

// Grammar text whose `root` matches the JSON texts valid under `schema` (compact, with optional
// single spaces or newline-and-indent between tokens). Properties come in the schema's key order:
// pass an ordered_json to keep the order the client wrote (nlohmann::json sorts keys).
Result<std::string> json_schema_to_grammar(const nlohmann::ordered_json& schema);
Result<std::string> json_schema_to_grammar(const nlohmann::json& schema);

// Grammar text whose `root` matches any JSON object (response_format json_object).
std::string json_object_grammar();

}  // namespace hz::grammar
