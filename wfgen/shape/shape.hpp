// Offline shape checking with the Subscript DSL.
//
// check() runs cl-waffe2's determine rules on a parsed declaration, in
// cl-waffe2's two passes (vm/nodes/node.lisp, `forward :around`): the
// declaration as written first; when that reports errors and the declaration
// uses `~`, again with every `~` removed ("fixed"). The second pass's shapes
// are the answer when it succeeds; otherwise the first pass's reports are.
// Within a pass:
//  1. constructor arguments are bound first (`C_in = in-channels` style
//     bindings and symbols that are arguments themselves);
//  2. `where` bindings are evaluated in order; one that needs a symbol known
//     only from the inputs waits until the inputs are read;
//  3. each input is matched against its subscripts: `~` takes the leading
//     (or the remaining) dims, symbols are determined by the first value they
//     meet and checked against every later one. Every input that uses `~`
//     must have the rank of the first one that does (cl-waffe2 compares the
//     ranks, not the number of dims `~` covers); the dims `~` covers are
//     compared axis by axis only when `~` appears in an output, and `~` is
//     then, at each axis, the first value an input gave it;
//  4. the outputs are predicted from the table; a symbol never determined is
//     an error; `~` that no input uses covers no dims.
// The first binding of a symbol wins; a different later value is reported,
// and checking goes on, so later reports are "calculated ignoring the first
// errors" as cl-waffe2 prints them.
//
// Dims may be symbolic (`batch`): unknown at build time, unified by name, and
// a conflict is reported when two different concrete sizes meet one symbol.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wfgen/subscript/subscript.hpp"

namespace wfgen::shape {

// One dimension: a known size, or a symbolic expression over named sizes
// that are bound at run time (`batch`, `batch * 3`).
class Dim {
 public:
  Dim() : Dim(0) {}
  Dim(std::int64_t value);  // NOLINT: implicit on purpose, dims are mostly numbers
  static Dim symbol(std::string name);
  // Arithmetic with constant folding; throws std::overflow_error or
  // std::domain_error (division by zero).
  static Dim binary(char op, const Dim& lhs, const Dim& rhs);

  bool is_known() const { return node_ == nullptr; }
  std::int64_t value() const { return value_; }
  // Replaces symbols for which `lookup` has a dim, folding constants again.
  Dim substitute(const std::function<std::optional<Dim>(const std::string&)>& lookup) const;
  // The names of the symbols this dim refers to.
  std::vector<std::string> symbols() const;
  // "3", "batch", "batch * 3".
  std::string str() const;

  friend bool operator==(const Dim& a, const Dim& b);
  friend bool operator!=(const Dim& a, const Dim& b) { return !(a == b); }

  struct Node;

 private:
  static Dim make_node(char op, const Dim& lhs, const Dim& rhs);
  std::int64_t value_ = 0;
  std::shared_ptr<const Node> node_;
};

using Shape = std::vector<Dim>;

// "(3 2)", "(batch 784)", "()" for rank 0.
std::string shape_str(const Shape& s);
std::string shapes_str(const std::vector<Shape>& s);

// A value in the symbol table: one dim, or a list of dims (`~`, `(10 10)`).
struct Value {
  Shape dims;
  bool is_list = false;

  static Value scalar(Dim d) { return {{std::move(d)}, false}; }
  static Value list(Shape s) { return {std::move(s), true}; }
  std::string str() const { return is_list ? shape_str(dims) : dims.front().str(); }
  friend bool operator==(const Value& a, const Value& b) = default;
};

// Constructor arguments, by name.
using Args = std::map<std::string, Value>;

// What a report is about, in the words of cl-waffe2's reports, so a user can
// look it up in cl-waffe2's documentation.
enum class Category {
  Arguments,     // "Received too few/many arguments": the number of inputs
  Rank,          // "The Rank is too low/high": an input's number of dims
  Batch,         // "Inconsistent use of batch": `~` differs between inputs
  Mismatch,      // a symbol or fixed size determined as one value, given another
  Undetermined,  // an output symbol no input, argument or binding determines
  Where,         // a `where` binding that cannot be evaluated or disagrees
};
// "arguments", "rank", "batch", "mismatch", "undetermined", "where".
const char* category_name(Category c);

// One numbered entry of a Shape-Error report.
struct Report {
  std::string symbol;  // the symbol it is about ("~", "i"), or "" for counts
  std::string text;    // the report's lines, without the number
  // Where in the DSL text it points (the subscript or binding), if anywhere.
  std::optional<std::size_t> offset;
  std::size_t length = 1;
  Category category = Category::Mismatch;
};

struct Output {
  std::optional<std::string> name;
  Shape shape;
  std::optional<int> inplace_of;  // index of the input whose buffer it reuses
};

struct CheckResult {
  std::vector<Output> outputs;   // predicted, even when there are errors ("?" unknown)
  std::vector<Report> reports;   // empty: the shapes check
  // Concrete values given to symbolic input dims while unifying (batch = 32).
  std::map<std::string, Dim> unified;

  bool ok() const { return reports.empty(); }
};

struct CheckOptions {
  // Printed as "The operation was : <Node: NAME (DSL)>"; empty uses <Subscript: ...>.
  std::string operation;
  // The word before the name: "Node", or "Model" for a model's where line.
  std::string kind = "Node";
  // Shapes a model's body returned, printed as "Returned Output(s)" under the
  // predicted ones (checking a model's results against its where line).
  std::optional<std::vector<Shape>> returned;
};

// Checks `decl` against concrete or symbolic input shapes.
CheckResult check(const subscript::Declaration& decl, const Args& args, const std::vector<Shape>& inputs);

// The full cl-waffe2-style report: operation, Input(s), Predicted Output(s),
// numbered reports, with the later ones under "Also, these reports could be
// helpful for you (calculated ignoring the first errors.)".
std::string render_report(const subscript::Declaration& decl, const std::vector<Shape>& inputs,
                          const CheckResult& result, const CheckOptions& options = {});

// Parses "10x3", "10,3", "10 3", "(10 3)", "batch,784" or "batchx784" (a
// symbolic name containing 'x' needs commas), "" or "()" for rank 0.
// Throws std::invalid_argument with a message.
Shape parse_shape(std::string_view text);

// Parses a constructor-argument value: "3", "10,10,10", "(10 10 10)", "batch".
Value parse_value(std::string_view text);

}  // namespace wfgen::shape
