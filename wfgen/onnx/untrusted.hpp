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
//   - sizes are checked before memory is taken (untrusted_data.cpp): the
//     file is parsed with protobuf's size and recursion limits set; every
//     tensor's dims are sizes whose product fits, its data holds exactly that
//     many values, and all tensors together stay under a limit.
//   - external data stays inside the model's folder: a location that is
//     absolute, climbs out with '..' or resolves (through symlinks) outside
//     the folder is refused; offset and length are checked against the file.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <optional>
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

// --- sizes and external data (untrusted_data.cpp) ------------------------------

// The longest repeated attribute (ints, floats, strings, tensors, graphs) and
// the largest attribute tensor an operator other than Constant may have: the
// attributes wfgen imports (axes, pads, perm, kernel_shape, split, ...) hold
// a few values each.
inline constexpr int kMaxAttributeValues = 1024;
// Protobuf's nesting limit for a model file (its own default, set explicitly).
inline constexpr int kMaxNesting = 100;

// About how many bytes parsing `bytes` as a ModelProto takes (its messages,
// strings and arrays, from the wire format with ONNX's schema: wire_cost.cpp);
// nullopt when the bytes are not ONNX's wire format.
std::optional<std::uint64_t> parse_cost(std::string_view bytes);

// Parses `bytes` (the contents of `path`) into `model`, with protobuf's total
// size and recursion limits set, after parse_cost says it stays under
// `max_bytes`. Throws UserError.
void parse_model(const std::string& bytes, const std::string& path, std::uint64_t max_bytes, onnx::ModelProto& model);

// Reads the file `path` into `model`: its size is checked against
// `max_data_bytes` (and protobuf's 2 GiB) before it is read. Throws UserError.
void read_model_file(const std::string& path, std::uint64_t max_data_bytes, onnx::ModelProto& model);

// Reads the file `path` (a TensorProto: a frozen input) into `t` with the
// same limits; false when it does not parse. Throws UserError for a file too large.
bool read_tensor_file(const std::string& path, std::uint64_t max_data_bytes, onnx::TensorProto& t);

// The tensors of one import, checked one by one against a shared budget.
class TensorChecker {
 public:
  // `path`: the model file (errors name it; external data is read from its
  // folder). `max_data_bytes`: the limit of all tensors' data together.
  TensorChecker(std::string path, std::uint64_t max_data_bytes) : path_(std::move(path)), max_bytes_(max_data_bytes) {}
  // Every initializer and every tensor and repeated field of the main
  // graph's node attributes; external data is read into raw_data.
  void check_model(onnx::ModelProto& model);
  // One tensor, `what` saying whose it is ("initializer 'w'", "attribute
  // 'value' of node 'c' (Constant)"). `external_ok`: may it refer to
  // external data (in the model's folder)?
  void check(onnx::TensorProto& t, const std::string& what, bool external_ok);
  std::uint64_t total_bytes() const { return total_; }

 private:
  [[noreturn]] void fail(const std::string& message) const;
  void check_node(onnx::NodeProto& node);
  std::uint64_t element_count(const onnx::TensorProto& t, const std::string& what) const;
  void check_present(const onnx::TensorProto& t, const std::string& what, std::uint64_t count) const;
  void read_external(onnx::TensorProto& t, const std::string& what, std::uint64_t bytes);
  std::string path_;
  std::uint64_t max_bytes_;
  std::uint64_t total_ = 0;
};

}  // namespace wfgen::onnx_import
