// Internal to wfgen/trace: a value while tracing, and the checks of a
// model's results that run outside the tracer (outputs.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wfgen/body/body.hpp"
#include "wfgen/graph/graph.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::trace::detail {

// One comparison of sizes: `lhs op rhs` with op one of == != < <= > >=.
struct SizeCompare {
  shape::Dim lhs;
  std::string op;
  shape::Dim rhs;
};

// A value while tracing: a tensor (graph value id), a plain value, or a
// size that is only known at run time (Sym: a where symbol bound by a
// run-time dim, x.size(k) of one inside an assert; or, while `wfgen check`
// traces a model no build uses, an int argument without a value). Cond is
// a conjunction of comparisons of such sizes (an assert checked at run
// time); Unknown is an argument of another type without a value (`what`
// names it): anything that needs its value cannot be decided.
struct TValue {
  enum class Kind { None, Tensor, Int, Float, Bool, List, Sym, Cond, Unknown };
  Kind kind = Kind::None;
  int id = -1;
  std::int64_t i = 0;
  double f = 0;
  std::vector<TValue> items;
  shape::Dim dim;
  std::vector<SizeCompare> conds;
  std::string what;

  static TValue tensor(int id) { TValue v; v.kind = Kind::Tensor; v.id = id; return v; }
  static TValue of_int(std::int64_t x) { TValue v; v.kind = Kind::Int; v.i = x; return v; }
  static TValue of_float(double x) { TValue v; v.kind = Kind::Float; v.f = x; return v; }
  static TValue of_bool(bool x) { TValue v; v.kind = Kind::Bool; v.i = x ? 1 : 0; return v; }
  static TValue list(std::vector<TValue> items) { TValue v; v.kind = Kind::List; v.items = std::move(items); return v; }
  // A size: an Int when it is known, else a Sym.
  static TValue size(const shape::Dim& d) {
    if (d.is_known()) return of_int(d.value());
    TValue v;
    v.kind = Kind::Sym;
    v.dim = d;
    return v;
  }
  static TValue unknown(std::string what) { TValue v; v.kind = Kind::Unknown; v.what = std::move(what); return v; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_symbolic() const { return kind == Kind::Sym || kind == Kind::Cond || kind == Kind::Unknown; }
  double number() const { return kind == Kind::Float ? f : static_cast<double>(i); }
};

const char* kind_word(TValue::Kind k);

// What a model's where line is checked with: its arguments and the shapes of
// the tensors passed in (taken before the body can rebind their names).
struct Declared {
  shape::Args args;
  std::vector<shape::Shape> inputs;
};

// What a model's body returned: a tensor's shape, or the kind of a value
// that is not a tensor.
struct Returned {
  std::vector<TValue> values;
  std::vector<shape::Shape> shapes;  // of the tensors (empty for the others)
  SourceLoc loc;                     // the return statement
  int length = 1;
};

// The tensors a model's body returned against the outputs of its where
// line (count, rank and every dim): throws UserError, a Shape-Error report
// at the return statement with a note at the where line's output.
void check_outputs(const spec::Spec& spec, const spec::Model& m, const Declared& in, const std::vector<TValue>& results,
                   const std::vector<shape::Shape>& shapes, const std::optional<Returned>& ret);

// values.cpp
TValue from_arg(const spec::ArgValue& v);
// A traced value as a constructor argument of `type`; nullopt if it does not fit.
std::optional<spec::ArgValue> to_arg(const TValue& v, spec::ArgType type);
// Numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<shape::Shape> broadcast_shape(const shape::Shape& a, const shape::Shape& b);
std::string join(const std::vector<std::string>& v);  // "a, b, c"
std::string number_str(double x);                    // %g
// The statement as the parser understood it (comments dropped, spacing
// normalised): this text reaches generated comments, so it is never the raw
// spec line.
std::string statement_text(const body::Stmt& s);

// checks.cpp
bool in_stdlib(const SourceLoc& loc);  // a place in the embedded standard library
// An error inside a model of the standard library, reached through calls
// (notes "in this call of model ..."), is reported at the innermost call in
// a file of the user's: the error there, the calls from it inwards as
// notes, and last the line of the standard library it failed at.
std::vector<Diagnostic> user_first(std::vector<Diagnostic> ds);

// A call of a model with several results (for -Wunused-output).
struct ModelCall {
  SourceLoc loc;
  int length = 1;
  std::string model;
  std::vector<int> results;  // graph values; -1: not a tensor
  std::vector<std::string> names;
};
// The symbols of a model's where line that its inputs bind (`n` of
// X[batch n]) become names of the body, unless an argument, parameter or
// input has that name: a size known while tracing is an integer, a run-time
// one a Sym that only asserts can use (checked at run time).
void bind_where_symbols(std::map<std::string, TValue>& env, const graph::Graph& g, const spec::Model& m);
// The arguments and input shapes a model's where line is checked with, or
// nullopt when it declares no outputs (or an input is not a tensor).
std::optional<Declared> declared(const std::map<std::string, TValue>& env, const graph::Graph& g, const spec::Model& m);
// The values of the names and sizes an assert's condition reads, for its
// message: "d_model = 32, heads = 3" (value_of: nullopt when it has none).
std::string condition_values(const body::Expr& e, const std::function<std::optional<TValue>(const body::Expr&)>& value_of);

// -Wunused-output: the results of such calls that nothing build `build` returns reads.
std::vector<Diagnostic> unused_outputs(const spec::Spec& spec, const graph::Graph& g, const std::vector<ModelCall>& calls,
                                       const std::string& build);

}  // namespace wfgen::trace::detail
