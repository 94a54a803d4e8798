// The Subscript DSL: parsing `A[~ i j] B[~ j k] C[~ i k] -> C[~ i k] where ...`.
//
// Grammar (cl-waffe2's, see docs/subscript-dsl.md):
//
//   declaration := arguments '->' arguments [ 'where' binding* ]
//   arguments   := argument*
//   argument    := [ name ] '[' subscript* ']'
//   subscript   := '~' | symbol | integer
//   binding     := symbol '=' expr
//   expr        := infix integer arithmetic over integers, symbols, lists
//                  `(10 10 10)`, parentheses and prefix forms `(+ a b)`,
//                  `(floor a b)`, `(car l)`/`(first l)`, `(second l)`,
//                  `(third l)`, `(nth k l)`, `(if (numberp x) a b)`,
//                  cl-waffe2's `(conv-out-size in pad dil k stride)`,
//                  `(pool-out-size in pad k stride)` and `(shape a)`;
//                  `/` is floor division; `x[k]` indexes a list;
//                  `;` starts a comment
//
// Symbols and pointer names are Lisp symbols, as in cl-waffe2: they may
// contain `-`, `_`, `+`, `*`, `/`, `.` and digits after the first character
// (`batch-size`, `hidden_t+1`, `X.grad`), so infix arithmetic needs spaces
// (`a - 1`, `h * 2`); `a-1` is one symbol. Generated C++ mangles such names
// (wfgen::cpp_identifier) and keeps the original in comments and messages.
//
// parse() checks everything that can be known from the text alone: `~` at
// most once per argument. `~` in the outputs only is allowed: it binds no
// dims, as cl-waffe2's checker does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace wfgen::subscript {

// A parse error at a byte offset of the DSL text.
class ParseError : public std::runtime_error {
 public:
  ParseError(std::string message, std::size_t offset, std::size_t length)
      : std::runtime_error(message), offset_(offset), length_(length == 0 ? 1 : length) {}
  std::size_t offset() const { return offset_; }
  std::size_t length() const { return length_; }

 private:
  std::size_t offset_;
  std::size_t length_;
};

struct Expr {
  // IfNumber is cl-waffe2's `(if (numberp x) then else)`: `then` when x is a
  // size, known or symbolic (wfgen computes symbolic sizes, so `else`, the
  // "-1 = undetermined" branch of cl-waffe2, is kept only for printing).
  enum class Kind { Integer, Symbol, List, Binary, Negate, Index, IfNumber };
  Kind kind = Kind::Integer;
  std::int64_t value = 0;         // Integer
  std::string name;               // Symbol
  char op = 0;                    // Binary: + - * /
  std::vector<Expr> items;        // List items; Binary/Index: [lhs, rhs]; Negate: [operand];
                                  // IfNumber: [x, then, else]
  std::size_t offset = 0;         // where it starts in the DSL text
  std::size_t length = 0;

  // Renders the expression back in the DSL's infix syntax.
  std::string str() const;
};

struct Subscript {
  enum class Kind { Batch, Symbol, Integer };  // `~`, `i`, `3`
  Kind kind = Kind::Symbol;
  std::string name;         // Symbol
  std::int64_t value = 0;   // Integer
  std::size_t offset = 0;
  std::size_t length = 0;
};

struct Argument {
  std::optional<std::string> name;  // pointer name; none for `[x y]`
  std::vector<Subscript> dims;
  std::size_t offset = 0;
  std::size_t length = 0;

  bool has_batch() const;
  // "A[~ i j]" or "[~ i j]".
  std::string str() const;
};

struct Binding {
  std::string symbol;
  Expr value;
  std::size_t offset = 0;  // of the symbol
  std::size_t length = 0;  // of `symbol = expr`
};

struct Declaration {
  std::vector<Argument> inputs;
  std::vector<Argument> outputs;
  std::vector<Binding> where;
  std::string text;  // the source text, as given

  // For each output, the index of the input whose pointer name it shares
  // (the output reuses that input's buffer), or nullopt.
  std::vector<std::optional<int>> inplace_of() const;
  bool uses_batch_in_inputs() const;
  bool uses_batch_in_outputs() const;
  // "A[~ i j] B[~ j k] -> C[~ i k] where k = 3", normalised spacing.
  std::string str() const;
};

// Parses one line of Subscript DSL. Throws ParseError.
Declaration parse(std::string_view text);

// The first `~` of an output when no input has one, or null. Such a `~`
// always covers no dims; `wfgen shape` accepts it as cl-waffe2 does, while a
// spec's node or model is told to drop it (its kernels could never use it).
const Subscript* batch_only_in_outputs(const Declaration& d);

// True for names a symbol or pointer may have: a letter or `_` first, then
// letters, digits and `_ - + * / .` (an operator character not last).
bool is_symbol(std::string_view name);

// The narrower names of spec arguments and parameters, which C++ code and
// element-wise expressions refer to: letters, digits, `_` and `-` (not last).
bool is_name(std::string_view name);

}  // namespace wfgen::subscript
