// Private to the spec stage: validation of a parsed spec file against the
// embedded JSON Schema (valijson), with valijson's findings turned into
// diagnostics that name the key, what was found and what was expected.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "wfgen/spec/yaml_source.hpp"

namespace wfgen::spec::detail {

// Appends one diagnostic per schema violation of `root` to `errors`.
void validate(const Source& src, const YAML::Node& root, std::vector<Diagnostic>& errors);

// "a mapping", "a list", "'text'": how a YAML value is named in messages.
std::string yaml_kind(const YAML::Node& n);

// What valijson found wrong: where ("<root>", "[key]", "[index]"...) and its
// message.
struct SchemaViolation {
  std::vector<std::string> context;
  std::string description;
};

// Checks `root` (as typed JSON) against the embedded schema with valijson;
// empty when it conforms. In schema_valijson.cpp, apart from the messages:
// valijson's templates are most of this stage's compile time, and that file
// is compiled at -O1 (it checks files of a few KB).
std::vector<SchemaViolation> run_valijson(const YAML::Node& root);

}  // namespace wfgen::spec::detail
