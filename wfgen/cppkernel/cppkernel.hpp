// Reading user C++ kernels (`cpp:` implementations) with Clang libTooling.
//
// An implementation spec may name a function in a C++ file:
//
//   impls:
//     - {node: MyOp, device: cpu, dtypes: [f32, f64], ranks: [1, 2],
//        cpp: {file: kernels/my_op.cpp, function: my_op}}
//
// resolve() parses that one file (parse only, no code generation; bodies of
// functions in included headers are skipped), finds the function by name and
// checks every parameter against what the node needs. The generated kernel
// then calls it, spelled by KernelInfo::callee(). This is the only way raw C++
// enters generated code, and it enters only after Clang has read it.
//
// The convention a kernel follows, in the order of the node's operands:
//
//   #include <wfgen/runtime_types.hpp>
//
//   template <class T, int R>
//   void my_op(wfgen::rt::View<const T, R> a,      // TensorIn: read, never written
//              wfgen::rt::View<T, R> out,          // TensorOut: output / in-place
//              std::int64_t axis,                   // Int
//              T alpha,                             // Float
//              bool keepdims,                       // Bool
//              std::span<const std::int64_t> dims,  // Ints
//              const std::vector<double>& w);       // Floats
//
//  - Tensors are `wfgen::rt::View<const T, R>` for inputs the kernel does not
//    write and `wfgen::rt::View<T, R>` for outputs and in-place operands,
//    taken by value or by const reference (aliases of View are fine).
//  - T is float, double, std::int32_t, std::int64_t, std::uint8_t or the
//    function's template type parameter; R is an integer literal or its
//    template non-type parameter. All tensors of one kernel share T and R,
//    unless an ExpectedParam fixes its own dtype or rank (e.g. i64 indices).
//  - Scalars: Int is any integer type but bool (int, long, std::int64_t...);
//    Float is float or double, or T; Bool is bool; Ints is
//    `std::span<const std::int64_t>` or `const std::vector<std::int64_t>&`;
//    Floats is the same with double. By value or const reference.
//  - The return type is void.
//  - A function template may be over T, R, both or neither (template
//    parameters in any order, nothing else). A non-template function serves
//    exactly one dtype and rank; several non-template overloads of the same
//    name may together serve several. Every (dtype, rank) the implementation
//    lists must be served by some overload.
//  - The function may live in a namespace; name it qualified ("ns::my_op") or
//    unqualified when the name is unique in the file. Only functions defined
//    or declared in the named file itself count, not those of its includes.
//
// Call sites: pass views of the exact types above, integer/float scalars as
// std::int64_t/double (or T), and Ints/Floats as std::vector lvalues, which
// bind to both accepted forms.
//
// This header includes no Clang or LLVM header; the library links
// libclang-cpp privately.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wfgen/runtime_types.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::cppkernel {

// What a node operand or constructor argument is, seen from the kernel.
enum class ParamKind { TensorIn, TensorOut, Int, Float, Bool, Ints, Floats };

// "input view", "output view", "integer", "float", "bool", "list of integers",
// "list of floats".
const char* param_kind_name(ParamKind kind);

struct ExpectedParam {
  ExpectedParam() = default;
  ExpectedParam(std::string name_, ParamKind kind_, std::optional<rt::DType> fixed_dtype_ = {},
                std::optional<int> fixed_rank_ = {})
      : name(std::move(name_)), kind(kind_), fixed_dtype(fixed_dtype_), fixed_rank(fixed_rank_) {}

  std::string name;  // the operand or argument name in the spec, for messages
  ParamKind kind = ParamKind::TensorIn;
  // Tensors only: a dtype / rank this operand has whatever the kernel's
  // dtype and rank are (argmax indices are i64). Unset: the kernel's own.
  std::optional<rt::DType> fixed_dtype;
  std::optional<int> fixed_rank;
};

struct Expectation {
  std::string function;                // as written in the spec
  std::vector<ExpectedParam> params;   // in call order
  std::vector<rt::DType> dtypes;       // every dtype the impl is generated for
  std::vector<int> ranks;              // every rank the impl is generated for
  SourceLoc spec_loc;                  // the `cpp:` entry, for file/function errors
};

// One template parameter of a kernel function template.
enum class TemplateParam { DType, Rank };

// One C++ function (or function template) of the kernel's name.
struct Overload {
  SourceLoc loc;                              // the function's name
  std::vector<TemplateParam> template_params; // declaration order; empty: not a template
  std::optional<rt::DType> dtype;             // set: serves only this dtype
  std::optional<int> rank;                    // set: serves only this rank

  bool serves(rt::DType dtype, int rank) const;
};

struct KernelInfo {
  std::string function;        // qualified as the call needs it: "my_op", "ns::my_op"
  std::filesystem::path file;  // the kernel file as given to resolve()
  SourceLoc loc;               // the first overload's name
  bool dtype_template = false; // some overload is a template over the dtype
  bool rank_template = false;  // some overload is a template over the rank
  std::vector<Overload> overloads;  // source order

  // The overload that serves (dtype, rank): a non-template one if there is
  // one, else a template. Throws InternalError when none does (resolve()
  // has checked every pair the Expectation lists).
  const Overload& overload_for(rt::DType dtype, int rank) const;

  // The call target for (dtype, rank): "my_op<float, 2>", "my_op<2, double>",
  // "my_op<std::int64_t>", or "my_op" for a non-template overload.
  std::string callee(rt::DType dtype, int rank) const;
};

// Parses `file` (C++20, with the runtime headers and the resource directory
// of the Clang it was built with on the include path, then `extra_args` such
// as "-I<dir>" or "-DNAME") and checks the function `expect.function` against
// `expect`. Throws UserError with every mismatch found, each at the C++
// file:line:col of the offending parameter or function; file and lookup
// errors point at expect.spec_loc.
KernelInfo resolve(const std::filesystem::path& file, const Expectation& expect,
                   const std::vector<std::string>& extra_args = {});

}  // namespace wfgen::cppkernel
