// Internal to wfgen/trace: the tracer, which runs a model's body over
// symbolic tensors and records the graph (trace_build), checks a model by
// itself (check_model), and appends what the autodiff and the rewrites build
// (Builder). Its member functions live in three files, one stage each:
//   trace.cpp        the driver: builds, models and their frames, statements,
//                    asserts, the public entry points;
//   expressions.cpp  evaluating expressions: operators, calls, methods and
//                    views of the body language, subscripts, reductions;
//   calls.cpp        recording values: node calls (shape checks, the
//                    implementation per device, broadcasting), views, copies.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wfgen/body/body.hpp"
#include "wfgen/graph/graph.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"
#include "wfgen/trace/tvalue.hpp"

namespace wfgen::trace::detail {

using graph::Dim;
using graph::Graph;
using graph::Kind;
using graph::Shape;
using graph::Value;
using graph::ViewKind;

// A check `wfgen check` cannot decide: it needs a value the model's own
// where line and arguments do not give (an argument without a default).
struct Undecided {
  SourceLoc loc;
  int length = 1;
  std::string message;
};

// One model being traced: its spec, the body text, the variables.
struct Frame {
  const spec::Model* model = nullptr;
  std::string scope;
  std::map<std::string, TValue> env;
  const body::Program* program = nullptr;
  // Inside a build called as a node by a differentiated model: the build's
  // one instance, whose parameters every call shares (shared_params_).
  bool shared = false;
};

constexpr int kMaxModelDepth = 32;
constexpr std::int64_t kMaxLoopIterations = 100000;

class Tracer {
 public:
  Tracer(const spec::Spec& spec, const spec::Build& build) : spec_(spec), build_(build) {}
  // `wfgen check` of a model by itself (symbolic): arguments without a value
  // and the where line's symbols stay symbolic, `~` is `tilde_rank` dims.
  Tracer(const spec::Spec& spec, const spec::Build& build, int tilde_rank)
      : spec_(spec), build_(build), symbolic_(true), tilde_rank_(tilde_rank) {}
  const std::vector<Diagnostic>& warnings() const { return warnings_; }
  // symbolic: the asserts that could not be decided (each a note).
  const std::vector<Diagnostic>& notes() const { return notes_; }
  // Continues a traced graph (the autodiff appends its pullback this way).
  Tracer(const spec::Spec& spec, const spec::Build& build, Graph g) : spec_(spec), build_(build), g_(std::move(g)) {}
  Graph& graph() { return g_; }
  Graph take() { return std::move(g_); }

  // --- the autodiff's entry points (detail::Builder) ---------------------------

  // Values made from now on are attributed to `loc` and `source` (the
  // forward line they differentiate, or the line a rewrite replaces), and
  // belong to the pullback unless `pullback` is false.
  void attribute(const SourceLoc& loc, const std::string& source, bool pullback = true, std::string scope = {});
  static TValue arg_value(const spec::ArgValue& v) { return from_arg(v); }

  // A node's backward expression with `names` bound; nullopt when it is the
  // number 0 (no gradient flows to that input).
  std::optional<int> eval_backward(const spec::Text& text, const std::vector<std::pair<std::string, TValue>>& names);
  int node(const std::string& name, const std::vector<int>& tensors, const std::vector<spec::ArgValue>& args = {});
  int permute_of(int x, const std::vector<int>& perm) { return permute(x, perm, here_); }
  int reshape_of(int x, const Shape& shape) { return reshape(x, shape, here_); }
  int broadcast_of(int x, const Shape& shape) { return broadcast(x, shape, here_); }
  int view_of(int base, ViewKind kind, const Shape& shape) { return view(base, kind, shape, here_); }
  // A fresh tensor of zeros (the node fill with value 0).
  int zeros(const Shape& shape);
  // Sums `x` over `axes`, keeping them as size 1.
  int sum_axes(int x, const std::vector<int>& axes);
  Graph run();

 private:
  // --- building the graph -----------------------------------------------------

  Value fresh(Kind kind, Shape shape, SourceLoc loc, std::string source);
  int add(Value v);
  const Value& val(int id) const { return g_[id]; }

  // --- errors -------------------------------------------------------------------

  [[noreturn]] void fail(SourceLoc loc, std::string message, std::string detail = {}, int length = 1);

  // The location of an expression of the body being traced.
  SourceLoc at(std::size_t offset) const { return text_->at(offset); }
  [[noreturn]] void fail_at(const body::Expr& e, std::string message, std::string detail = {});

  // A value needed while tracing that is not known: an error of the build
  // (a run-time size), or what `wfgen check` reports as not decidable.
  [[noreturn]] void not_known(const body::Expr& e, const TValue& v, const std::string& what);

  // Arithmetic and comparisons of sizes of which one is known only at run
  // time: a size, or (comparisons) a condition an assert checks at run time.
  TValue size_binary(const body::Expr& e, const TValue& l, const TValue& r);

  // A warning `-Wname` at an expression of the body being traced (once per place).
  void warn(const body::Expr& e, std::string message, const std::string& name);
  std::string condition_values(Frame& frame, const body::Expr& e);

  // assert COND, "message": checked now when COND is known while tracing; a
  // condition on run-time sizes becomes a check of the generated model
  // (Graph::assertions), made when its inputs are bound.
  void run_assert(Frame& frame, const body::Stmt& s);

  // -Wunused-output, once the build's outputs are known.
  void warn_unused_outputs();

  std::string current_source() const { return stmt_ ? detail::statement_text(*stmt_) : std::string(); }

  // --- arguments ----------------------------------------------------------------

  std::vector<std::pair<std::string, TValue>> build_args(const spec::Model&);

  // Binds a model's constructor arguments (given values, then defaults).
  void bind_args(Frame& frame, const spec::Model& m, const std::vector<std::pair<std::string, TValue>>& given, SourceLoc loc);

  // --- models -------------------------------------------------------------------

  // Traces a model's body. `check_inputs` (a call from another model) checks
  // the tensors passed against the where line; it runs after the body's
  // leading asserts, so that a model's stated preconditions speak first.
  std::vector<TValue> trace_model(Frame& frame, const spec::Model& m, const std::function<void()>& check_inputs = {});
  void bind_where_symbols(Frame& frame, const spec::Model& m) { detail::bind_where_symbols(frame.env, g_, m); }
  const body::Program& parsed(const spec::Model& m);
  Dim eval_dim(Frame& frame, const spec::Text& text, const spec::Param& p);

  // A tensor whose known dims multiply past what byte counts can hold
  // (int64, 8-byte elements) cannot be allocated; say so at its spec entry
  // rather than overflow later.
  void check_size(const Shape& shape, const SourceLoc& loc, const std::string& what);

  // --- a model's results against its where line ----------------------------------

  std::optional<Declared> declared(const Frame& frame, const spec::Model& m) const { return detail::declared(frame.env, g_, m); }

  // --- statements ---------------------------------------------------------------

  void run_block(Frame& frame, const body::Block& block);
  void run_stmt(Frame& frame, const body::Stmt& s);
  void assign(Frame& frame, const std::string& name, const TValue& v);
  std::int64_t int_of(Frame& frame, const body::Expr& e, const std::string& what);

  // --- expressions --------------------------------------------------------------

  TValue eval(Frame& frame, const body::Expr& e);
  TValue binary(Frame& frame, const body::Expr& e);
  TValue constant_binary(const body::Expr& e, const TValue& l, const TValue& r);

  // --- views ----------------------------------------------------------------------

  int view(int base, ViewKind kind, Shape shape, const body::Expr& e);
  // A Slice view: on each axis, the elements start, start + step, ... before stop.
  int slice(int base, Shape shape, std::vector<Dim> starts, std::vector<Dim> stops, std::vector<Dim> steps,
            const body::Expr& e);
  int permute(int base, const std::vector<int>& perm, const body::Expr& e);
  int reshape(int base, Shape shape, const body::Expr& e);
  int broadcast(int base, const Shape& to, const body::Expr& e);

  // A contiguous copy (before a reshape); a copy of indices is indices.
  int copy(int base, const body::Expr& e);

  // reshape(x, 2, -1) / x.reshape([2, -1]): one -1 is inferred.
  int reshape_to(int base, const std::vector<TValue>& dims, const body::Expr& e);

  // --- node calls ---------------------------------------------------------------

  // Calls a node with tensors (the in-place outputs are allocated) and
  // constructor arguments in order.
  TValue call_node_simple(const body::Expr& e, const std::string& node, const std::vector<int>& tensors,
                          const std::vector<spec::ArgValue>& args, bool copies_indices = false);

  // Indices reach only the index inputs of nodes (gather's and one_hot's
  // IDX): anywhere else an id would be used as a number.
  void check_indices(const body::Expr& e, const spec::Node& node, const std::vector<int>& tensors,
                     const std::vector<bool>& allocated, bool passes_all);
  TValue call_node(const body::Expr& e, const spec::Node& node, std::vector<int> tensors,
                   const std::vector<std::pair<std::string, TValue>>& named, bool copies_indices = false);

  // An impl's reject condition with this call's arguments (cl-waffe2's reject-p).
  bool rejects(const spec::Impl& impl, const spec::Node& node, rt::DType dtype, const std::vector<spec::ArgValue>& args,
               const body::Expr& e);
  // The dtype a call computes in: its inputs' (they must agree), else the build's.
  rt::DType call_dtype(const body::Expr& e, const spec::Node& node, const std::vector<int>& tensors,
                       const std::vector<bool>& allocated, bool passes_all);
  const spec::Impl* choose_impl(const spec::Node& node, int rank, rt::DType dtype, const std::vector<spec::ArgValue>& args,
                                const body::Expr& e);
  TValue broadcast_binary(const body::Expr& e, const std::string& node, int a, int b);
  TValue matmul(const body::Expr& e, int a, int b);

  // sum/mean/max/min/argmax/argmin(x, axis=None, keepdims=false)
  TValue reduce(Frame& frame, const body::Expr& e, const std::string& op, const std::vector<TValue>& pos,
                const std::map<std::string, TValue>& kw);
  TValue call(Frame& frame, const body::Expr& e);
  TValue method(Frame& frame, const body::Expr& e, const body::Expr& callee, const std::vector<TValue>& pos,
                const std::map<std::string, TValue>& kw);
  TValue tensor_method(const body::Expr& e, const std::string& name, int x, const std::vector<TValue>& args,
                       const std::map<std::string, TValue>& kw);
  TValue subscript(Frame& frame, const body::Expr& e);

  // A differentiable node made from a build (`as: node` with `backward:
  // true`, cl-waffe2's defmodel-as :asif :node :differentiable t). Its
  // kernel would be the build's generated class, whose parameters callers
  // can neither train nor load; so every call is traced as the build's model
  // instead: the same function, its parameters those of one instance that
  // every call shares (an RNN cell applied at each time step), named
  // `<build>.<param>` in the caller and trained, saved and loaded with its own.
  const spec::Build* differentiated_build_node(const std::string& name) const;
  TValue call_build_node(Frame& caller, const body::Expr& e, const spec::Build& b, const std::vector<TValue>& pos,
                         const std::vector<std::pair<std::string, TValue>>& kw);
  TValue call_model(Frame& caller, const body::Expr& e, const spec::Model& m, const std::vector<TValue>& pos,
                    const std::vector<std::pair<std::string, TValue>>& kw, const std::string* shared_as = nullptr);

  const spec::Spec& spec_;
  const spec::Build& build_;
  Graph g_;
  std::string scope_;
  const spec::Text* text_ = nullptr;
  const body::Stmt* stmt_ = nullptr;
  int depth_ = 0;
  std::map<const spec::Model*, body::Program> programs_;
  std::map<std::string, int> instances_;
  std::map<std::string, int> shared_params_;  // parameter path -> value, of builds called as nodes
  std::vector<const spec::Model*> stack_;
  bool symbolic_ = false;  // `wfgen check` of a model by itself
  int tilde_rank_ = 1;     // symbolic_: the dims a `~` of an input stands for
  bool in_assert_ = false; // evaluating an assert's condition: run-time sizes are values
  std::vector<Diagnostic> warnings_;
  std::vector<Diagnostic> notes_;
  std::vector<ModelCall> model_calls_;
  // Autodiff attribution.
  bool attributing_ = false;
  bool attr_pullback_ = true;
  SourceLoc attr_loc_;
  std::string attr_source_;
  spec::Text placeholder_;
  body::Expr here_;
};

}  // namespace wfgen::trace::detail
