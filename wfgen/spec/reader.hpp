// Private to the spec stage: the typed reading of a validated YAML document
// (reader.cpp) into a Spec's nodes, impls, models, paths and builds, and two
// helpers the checks of spec.cpp share with it.
#pragma once

#include <string>
#include <vector>

#include "wfgen/spec/spec.hpp"
#include "wfgen/spec/yaml_source.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::spec::detail {

// Reads `root` (validated against the schema, so the shapes of values are
// right) into `spec`; what the schema cannot say is appended to `errors`.
void read_document(const Source& src, const YAML::Node& root, Spec& spec, std::vector<Diagnostic>& errors);

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ");

// Whether a build's value can be given to an argument of type `t`: integers
// for int (a number too large for int64 is read as a float), any number for
// float, a list of such for ints and floats.
bool value_fits(const ArgValue& v, ArgType t);

}  // namespace wfgen::spec::detail
