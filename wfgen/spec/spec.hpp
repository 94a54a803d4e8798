// Spec loading: YAML files -> a typed, validated Spec.
//
// Every file is read, parsed as YAML, checked for duplicate keys, validated
// against schemas/spec.schema.json with valijson, and only then read into the
// types below. Every error is a UserError whose diagnostics point at
// file:line:col with the offending line, what was found and what was
// expected; all errors of all files are collected before throwing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "wfgen/runtime_types.hpp"
#include "wfgen/subscript/subscript.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::spec {

// A string from a spec with where it came from. For strings that are parsed
// further (Subscript DSL, expressions), `at(offset)` maps a byte offset of
// the value back to the file, through quotes and block scalars.
struct Text {
  std::string value;
  SourceLoc loc;                 // the first character of the value
  std::vector<SourceLoc> lines;  // the start of each line of the value
  bool exact = true;             // false: escapes make column mapping approximate

  SourceLoc at(std::size_t offset) const;
};

enum class ArgType { Int, Float, Bool, Ints, Floats };
const char* arg_type_name(ArgType t);

// A constructor-argument value.
using ArgValue = std::variant<std::int64_t, double, bool, std::vector<std::int64_t>, std::vector<double>>;
std::string arg_value_str(const ArgValue& v);

struct Arg {
  std::string name;
  ArgType type = ArgType::Int;
  std::optional<ArgValue> default_value;
  std::string doc;
  SourceLoc loc;
};

struct Node {
  std::string name;
  SourceLoc loc;
  std::vector<Arg> args;
  Text where_text;
  subscript::Declaration where;
  std::vector<Arg> slots;
  std::vector<bool> save_for_backward;  // empty: nothing saved
  std::vector<std::pair<std::string, Text>> backward;
  bool out_scalar = false;
  std::vector<std::string> extends;
  std::vector<SourceLoc> extends_locs;  // parallel to extends
  // Inputs that take indices (`indices:`): the only ones an integer build
  // input (Build::input_dtypes) may be passed to.
  std::vector<std::string> indices;
  std::vector<SourceLoc> indices_locs;  // parallel to indices
  bool takes_indices(std::string_view input) const;
  // The dtype of the output whatever the inputs' (`out_dtype:`): a cast
  // node. Its kernels are named and chosen by the input's dtype.
  std::optional<rt::DType> out_dtype;
  SourceLoc out_dtype_loc;
  std::string doc;
  bool from_stdlib = false;
  bool fused = false;  // made by wfgen's fusion pass from several calls, not from a spec
};

// How an implementation computes its node.
// Build: the kernel runs a build's generated class (a build with `as: node`).
// Fused: a row kernel made by wfgen's fusion pass (reductions with their
// element-wise prologue and epilogue); never written in a spec.
enum class BodyKind { Elementwise, Reduce, Gemm, Cpp, Builtin, View, Build, Fused };
const char* body_kind_name(BodyKind k);

enum class ReduceOp { Sum, Mean, Max, Min, ArgMax, ArgMin };
const char* reduce_op_name(ReduceOp op);

struct Impl {
  std::string node;
  std::string device;  // "cpu", "blas" or a user device
  SourceLoc loc;       // of the entry
  std::vector<rt::DType> dtypes;
  std::vector<int> ranks;  // sorted, unique; empty: the ranks the DSL allows, 1..4
  // Ranks generated only for a build that calls the node at that rank
  // (sorted, unique): a model's rank-6 reshape gets its rank-6 kernels
  // without every build, and `wfgen gen --stdlib`, writing ranks 5 to 8 of
  // every node.
  std::vector<int> demand_ranks;
  std::optional<Text> reject;
  BodyKind kind = BodyKind::Elementwise;
  Text elementwise;              // Elementwise
  ReduceOp reduce_op = ReduceOp::Sum;  // Reduce
  std::optional<Text> prologue, epilogue;
  std::filesystem::path cpp_file;  // Cpp: resolved against the spec file's folder
  std::string cpp_file_as_written;  // Cpp: relative to the spec file's folder, normalised
  Text cpp_function;
  std::string builtin;  // Builtin: gather, one_hot, im2col, fill, copy, arange
  std::string view;     // View: transpose, permute, reshape
  std::string build;    // Build: the build whose class the kernel runs
  std::int64_t parallel_grain = 0;  // 0: never split across threads
  // Builtin: fusion may give the kernel the element-wise calls that read
  // only its output as an epilogue (`fuse_epilogue: true`; its builtin must
  // take one: lower::epilogue_axes).
  bool fuse_epilogue = false;
  // Builtin scaled_softmax: fusion may run matmul -> this softmax -> matmul
  // as one attention kernel where the scores have no other reader
  // (`fuse_attention: true`; passes/fuse_attention.cpp).
  bool fuse_attention = false;
  // The gradient of each input for this implementation only; empty: the node's.
  std::vector<std::pair<std::string, Text>> backward;
  std::string doc;
  bool from_stdlib = false;
};

// How a parameter is initialised. Random ones use the build's seed.
struct Init {
  enum class Kind { Zeros, Ones, Constant, Uniform, Normal, Xavier, He };
  Kind kind = Kind::Zeros;
  double a = 0, b = 0;  // Constant: a; Uniform: [a, b]; Normal: mean a, std b
};

struct Param {
  std::string name;
  SourceLoc loc;
  std::vector<Text> shape;  // each an integer or an expression over the model's arguments
  Init init;
  bool requires_grad = true;
};

struct Model {
  std::string name;
  SourceLoc loc;
  std::vector<Arg> args;
  std::vector<Param> params;
  std::optional<Text> where_text;
  std::optional<subscript::Declaration> where;
  std::vector<std::string> inputs;  // tensor inputs in order (from where, or `inputs:`)
  Text call;
  std::string doc;
  bool from_stdlib = false;
};

// A rewrite of the traced graph (see passes/rewrite.cpp), in one of three forms.
struct PathQuery {
  std::string node;  // the call's node or a node it extends
  SourceLoc loc;
  std::optional<std::string> device;
  std::vector<rt::DType> dtypes;  // empty: any
  std::optional<Text> when;       // over the call's constructor arguments and `rank`
};

struct Path {
  enum class Kind { Symbolic, Bypass, Fusion };
  std::string name;
  SourceLoc loc;
  Kind kind = Kind::Symbolic;
  std::optional<std::string> device;
  Text pattern, replace;         // Symbolic
  std::string node, with;        // Bypass: calls of `node` become calls of `with`
  SourceLoc with_loc;
  std::vector<PathQuery> fuse;   // Fusion: the chain
  std::string into;              // Fusion: the node replacing it
  SourceLoc into_loc;
  std::string doc;
  bool from_stdlib = false;
};

// The optimizer of a build: a standard node (sgd, adam, adamw) that step()
// calls on every trainable parameter, and its hyper-parameters.
struct Optimizer {
  std::string node;
  SourceLoc loc;
  std::vector<std::pair<std::string, ArgValue>> values;  // in spec order: doubles and bools
  std::map<std::string, SourceLoc> locs;
};

struct Build {
  std::string name;
  SourceLoc loc;
  std::string model;
  SourceLoc model_loc;
  std::vector<std::pair<std::string, ArgValue>> args;  // in spec order
  std::map<std::string, SourceLoc> arg_locs;
  rt::DType dtype = rt::DType::f32;
  std::vector<std::string> devices{"cpu"};
  bool as_node = false;
  std::uint64_t seed = 0;
  // Autodiff (cl-waffe2's compile-forward-and-backward).
  bool backward = false;
  // Inputs the caller passes with an integer dtype (`input_dtypes:`), in
  // spec order: converted to `dtype` by the model, value by value, checked.
  std::vector<std::pair<std::string, rt::DType>> input_dtypes;
  std::map<std::string, SourceLoc> input_dtype_locs;
  std::optional<rt::DType> input_dtype(std::string_view input) const;
  // Inputs held in a dtype of their own (`typed_inputs:`), not converted:
  // the model computes on them in that dtype (casts are explicit nodes).
  std::vector<std::pair<std::string, rt::DType>> typed_inputs;
  std::map<std::string, SourceLoc> typed_input_locs;
  std::optional<rt::DType> typed_input(std::string_view input) const;
  std::vector<std::string> grad_inputs;  // inputs that get a gradient too
  std::vector<SourceLoc> grad_input_locs;
  std::optional<Optimizer> optimizer;
  bool fuse = true;  // paths and automatic fusion (`fuse: false` turns both off)
  // `math: fast`: the kernels wfgen makes by fusion for this build call
  // rt::math::fast::exp (within 6 ulp, no subnormal results) instead of the
  // accurate exp (1 ulp). Kernels of the standard library stay accurate.
  bool fast_math = false;
  SourceLoc math_loc;
  std::string doc;
};

struct Spec {
  std::vector<Node> nodes;
  std::vector<Impl> impls;
  std::vector<Model> models;
  std::vector<Path> paths;  // in priority order: the standard library's, then the files' in order
  std::vector<Build> builds;
  const Model* find_model(std::string_view name) const;
  const Build* find_build(std::string_view name) const;
  std::vector<std::string> files;  // in load order
  std::map<std::string, std::string> texts;  // file name -> contents, for diagnostics of later stages

  // The text of `loc`'s line, for a diagnostic's caret line ("" if unknown).
  std::string line_at(const SourceLoc& loc) const;

  const Node* find_node(std::string_view name) const;
  std::vector<const Impl*> impls_of(std::string_view node) const;
};

struct LoadOptions {
  // Files larger than this are refused before they are parsed.
  std::uintmax_t max_file_bytes = 16u << 20;
};

// Loads and validates spec files, in order. Throws UserError.
Spec load(const std::vector<std::filesystem::path>& files, const LoadOptions& options = {});

// Loads a spec from text (tests). `name` is used in messages.
Spec load_text(const std::string& name, const std::string& text);

// The standard library (embedded in the binary) followed by `files`. A node
// or impl of the user's with the same name (and device) replaces the
// standard one; `user_files` tells which files are the user's.
Spec load_with_stdlib(const std::vector<std::filesystem::path>& files, const LoadOptions& options = {});

// load_with_stdlib for a spec given as text (fuzzing, tests).
Spec load_text_with_stdlib(const std::string& name, const std::string& text);

// Names of the embedded standard-library spec files.
std::vector<std::string> stdlib_files();

// The JSON Schema of spec files, as embedded in the binary.
std::string_view schema_text();

}  // namespace wfgen::spec
