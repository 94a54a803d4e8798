// The ONNX operators wfgen imports: one table, one row an operator (as
// onnxruntime registers a kernel once with its opset range). Everything that
// lists operators reads it: the importer's dispatch (Importer::import_node),
// the "supported: ..." list of its refusals, the graph inputs it needs as
// constants, the names a value must not take, and `wfgen import
// --supported-operators` (which tests/onnx/conformance.py prints into
// docs/onnx-conformance.md).
//
// Adding an operator: one row in operator_table.cpp (sorted by name) and its
// handler, a member function of Importer. The table's invariants (sorted,
// unique, a handler and a doc in every row, sane opset ranges) are checked at
// compile time there.
// Internal to wfgen/onnx: the public interface is onnx_import.hpp.
#pragma once

#include <climits>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace onnx {
class NodeProto;
}

namespace wfgen::onnx_import::detail {

class Importer;
struct OperatorRow;

// A row's handler: writes the node's body statements (or refuses it), with
// the row for its parameter and attribute list.
using Handler = void (Importer::*)(const onnx::NodeProto& node, const OperatorRow& row);

// The first opset of the default domain the handlers import: older models
// are upgraded to opset 13 by ONNX's version converter first (upgrade.hpp).
constexpr int kFirstOpset = 7;
// `until` of an operator whose handler follows ONNX's changes up to now.
constexpr int kLatestOpset = INT_MAX;

// Inputs `k` of a node that must be constants (known when importing: shapes,
// axes, bounds, indices) from opset `since` on, as a bit mask (1 << k).
constexpr unsigned inputs(std::initializer_list<int> ks) {
  unsigned mask = 0;
  for (int k : ks) mask |= 1u << k;
  return mask;
}

struct OperatorRow {
  std::string_view name;     // the op_type, of the default domain
  Handler handler = nullptr;
  // A shared handler's parameter: the body function of a unary operator
  // ("abs"), the body operator of a binary one ("+"), ...; "" when unused.
  std::string_view param = "";
  int since = kFirstOpset;     // the opsets the handler imports correctly:
  int until = kLatestOpset;    // another opset is refused, naming this range
  // The attributes the handler reads, space-separated; any other is refused
  // (Importer::only_attributes). A handler may refuse more for some opsets.
  std::string_view attributes = "";
  unsigned constant_inputs = 0;  // inputs(...): needed as constants (--freeze-inputs freezes graph inputs read there)
  int constants_since = kFirstOpset;
  // The element types of the inputs computed at run time it takes, ONNX's
  // names space-separated. Every computed value is FLOAT in the body (BOOL
  // results are 0.0 / 1.0); constant inputs of other types are folded or
  // refused by name (Importer::operand).
  std::string_view dtypes = "FLOAT";
  std::string_view doc;  // one line: what the operator becomes in the body
};

// Every row, sorted by name.
std::span<const OperatorRow> operator_table();
// The row of the default domain's `op_type`, or nullptr.
const OperatorRow* find_operator(std::string_view op_type);
// "7+" or "7-17": the opsets a row imports.
std::string opset_range(const OperatorRow& row);
// The body functions the rows' shared handlers call by name (their params
// that are identifiers): values must not shadow them.
std::vector<std::string> body_functions();

}  // namespace wfgen::onnx_import::detail
