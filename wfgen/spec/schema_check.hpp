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

}  // namespace wfgen::spec::detail
