// Private to the spec stage: YAML documents with their source text, so that
// every node can be turned into a file:line:col and a caret line.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::spec::detail {

struct Source {
  std::string name;  // as shown in messages
  std::string text;
};

// Location of a YAML node (its first character).
SourceLoc loc_of(const Source& src, const YAML::Mark& mark);

// A diagnostic pointing at `node`, underlining its scalar token.
Diagnostic diag_at(const Source& src, const YAML::Node& node, std::string message);
Diagnostic diag_at(const Source& src, const YAML::Mark& mark, std::string message, int length = 1);

// A located copy of a scalar's value, able to map offsets back to the file.
Text text_of(const Source& src, const YAML::Node& scalar);

// Parses a whole file; YAML syntax errors and duplicate keys become
// diagnostics (appended to `errors`), in which case the result is null.
YAML::Node parse_yaml(const Source& src, std::vector<Diagnostic>& errors);

}  // namespace wfgen::spec::detail
