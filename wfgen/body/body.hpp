// The model body language: the `call:` of a model spec (and the `backward:`
// expressions of nodes), parsed by wfgen into a tree. It is never pasted
// into C++: the tracer (wfgen/trace) walks the tree with proxies.
//
//   call: |
//     h = relu(X @ W1 + b1)
//     for i in range(layers):
//       h = h + block(h, heads=4)
//     if use_bias:
//       y = h @ W2 + b2
//     else:
//       y = h @ W2
//     return y, sum(y, axis=1, keepdims=true)
//
// Statements (one per line, blocks by indentation as in Python, `#` comments):
//   NAME = expr               assignment
//   NAME, NAME = expr         unpacking of several results
//   return expr[, expr...]    the model's outputs
//   assert expr[, "message"]  a precondition, checked while tracing (or at run
//                             time when it depends on a run-time dim)
//   if expr: / elif expr: / else:   on constructor arguments, at trace time
//   for NAME in range(expr[, expr]):  unrolled at trace time
//   pass
// Expressions (Python precedence): `or`, `and`, `not`, comparisons
// (== != < <= > >=), + -, * / @ %, unary -, `**`, postfix calls
// `f(a, b, key=v)`, attributes `x.T`, method calls `x.reshape(2, -1)`,
// subscripts/slices `x[0]`, `x[:, 1:3]`, `x[::2]`, tuples `(a, b)` and lists
// `[1, 2]`, literals: integers, floats, true/false (also True/False); a
// string literal is allowed only as the message of an `assert`. Names:
// letters, digits, '_' (not '-': it is minus here).
//
// A minus sign directly before a number literal is folded into it: `-1` is
// an Int with ivalue -1 (its range covers the '-'), not a Unary. `-x`,
// `-(a)` and `-2 ** 2` (= -(2 ** 2)) stay Unary. `return (a, b)` gives two
// results, as `return a, b` does. The user reference, with every error
// message, is docs/model-language.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace wfgen::body {

// A syntax error at a byte offset of the body text.
class ParseError : public std::runtime_error {
 public:
  ParseError(std::string message, std::size_t offset, std::size_t length)
      : std::runtime_error(std::move(message)), offset_(offset), length_(length == 0 ? 1 : length) {}
  std::size_t offset() const { return offset_; }
  std::size_t length() const { return length_; }

 private:
  std::size_t offset_, length_;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::optional<std::string> keyword;  // `axis=1` has keyword "axis"
  ExprPtr value;
  std::size_t offset = 0;
  std::size_t length = 0;  // of `axis=1` (keyword, '=' and value) or of the value
};

// One part of a subscript: an index `i` or a slice `a:b:c` (parts optional).
struct SliceItem {
  bool is_slice = false;
  ExprPtr index;               // !is_slice
  ExprPtr start, stop, step;   // is_slice; null when omitted
  std::size_t offset = 0;
  std::size_t length = 0;      // of the item's text (`1:3`, `::2`, `0`)
};

struct Expr {
  enum class Kind {
    Int, Float, Bool, Name,
    Unary,      // op: "-", "not"
    Binary,     // op: "+", "-", "*", "/", "@", "%", "**", "==", "!=", "<", "<=", ">", ">=", "and", "or"
    Call,       // callee(args): callee is a Name or an Attribute (method call)
    Attribute,  // object.name
    Subscript,  // object[items]
    Tuple,      // (a, b) or a, b
    List,       // [a, b]
  };
  Kind kind = Kind::Int;
  std::int64_t ivalue = 0;  // Int, Bool (0/1)
  double fvalue = 0;        // Float
  std::string name;         // Name, Attribute (the attribute), Unary/Binary operator in `op`
  std::string op;
  std::vector<ExprPtr> operands;  // Unary: 1; Binary: 2; Call: [callee]; Attribute/Subscript: [object]; Tuple/List: items
  std::vector<Arg> args;          // Call
  std::vector<SliceItem> items;   // Subscript
  std::size_t offset = 0;         // byte range in the body text
  std::size_t length = 0;

  std::string str() const;  // back to source syntax, normalised
};

struct Stmt;
using Block = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { Assign, Return, If, For, Pass, Assert };
  Kind kind = Kind::Pass;
  std::vector<std::string> targets;   // Assign: one or more names; For: the loop variable
  std::vector<std::size_t> target_offsets;
  ExprPtr value;                      // Assign: the value; If, Assert: condition; For: range end
  ExprPtr range_start;                // For: range(start, end) start, else null
  std::vector<ExprPtr> results;       // Return
  Block body;                         // If: then; For: loop body
  Block orelse;                       // If: else (an elif is an If inside orelse)
  std::string message;                // Assert: the message (empty: none given)
  std::size_t message_offset = 0;     // Assert: of the message's opening quote
  std::size_t offset = 0;             // of the statement's first token
  std::size_t length = 0;             // of its first line
  int line = 0;                       // 1-based line within the body text
};

// Limits that keep untrusted bodies from overflowing the stack of the parser
// or of any pass that walks the tree recursively: the height of one
// expression tree, the nesting of parentheses/brackets/unary operators, and
// the nesting of blocks (each `elif` counts as one level) are each at most
// kMaxNesting; a body has at most kMaxStatements statements.
inline constexpr int kMaxNesting = 200;
inline constexpr std::size_t kMaxStatements = 100000;

// True when both trees have the same kinds, values, names, operators,
// keywords and children; offsets are ignored. parse_expression(e.str())
// gives a tree that is same_tree with e.
bool same_tree(const Expr& a, const Expr& b);

struct Program {
  Block statements;
  std::string text;
};

// Parses a body. Throws ParseError.
Program parse(std::string_view text);

// Parses one expression (a node's `backward:` entry). Throws ParseError.
ExprPtr parse_expression(std::string_view text);

// The language's keywords (`if`, `and`, `return`, `True`, ...): no name may be one.
bool is_keyword(std::string_view word);

}  // namespace wfgen::body
