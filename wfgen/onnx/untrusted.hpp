// An ONNX model file is input from a stranger. This unit is where the
// importer makes it harmless before reading it (docs/onnx.md, "What a model
// file can and cannot do"):
//   - names become data: every name in the file (nodes, values, graphs,
//     operator types, domains, dim params, attribute names and strings,
//     producer) is escaped in place into printable ASCII, so no
//     name can end a comment, a line or a YAML scalar in what the importer
//     writes. The escape is one-to-one, so names that differ stay different
//     and the graph's connections are unchanged.
//   - doc strings are written as double-quoted YAML scalars with escapes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace wfgen::onnx_import {

// The longest name (in bytes, before escaping) a model file may hold.
inline constexpr std::size_t kMaxNameBytes = 4096;

// `s` as printable ASCII: '\' doubled, line breaks, tabs and other control
// characters and every non-ASCII byte as \n, \t, \r or \xNN. One-to-one.
std::string escape_name(std::string_view s);

// Escapes every name of `model` in place (escape_name); doc strings and
// external data locations are left as they are (they are never written as
// names), and so are metadata_props and functions (never read). Throws UserError naming `path` for a name longer than kMaxNameBytes.
void escape_names(onnx::ModelProto& model, const std::string& path);

// `s` as a double-quoted YAML scalar of printable ASCII that reads back as
// `s`: '"' and '\' escaped, control characters as YAML escapes, UTF-8
// sequences as \u / \U escapes (a byte that is not valid UTF-8 as \uFFFD).
std::string yaml_quoted(std::string_view s);

}  // namespace wfgen::onnx_import
