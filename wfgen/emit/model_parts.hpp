// Internal to wfgen/emit: the parts of a generated model class that more
// than one file writes. emit_model.cpp fills the class's templates
// (templates/model_class.*.in: header, tensor table, shape code, forward
// and the Compiled-Composite API); instructions.cpp plans the instruction
// tables and prints `wfgen disasm`; emit_training.cpp fills the training
// API's (backward(), grad(), zero_grad(), step()); model_parts.cpp holds
// the helpers they share.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/emit/emit_model.hpp"
#include "wfgen/graph/graph.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::emit::detail {

using graph::Dim;
using graph::Graph;
using graph::Kind;
using graph::Shape;
using graph::Value;
using graph::ViewKind;

std::string_view template_text(std::string_view name);
// The section `name` of a template of several: the text between a line
// "{{#name}}" and the next "{{/name}}" (which may follow a hole on its line,
// so a section can end without a newline).
std::string_view template_section(std::string_view text, std::string_view name);
extern const char* kBanner;
std::string num(std::int64_t v);

// A string literal for any text: quotes, backslashes and non-printable bytes escaped.
std::string literal(std::string_view s);

// Text safe inside a // comment: printable ASCII, no trailing backslash.
std::string comment_text(std::string_view s);
std::string dim_cpp(const Dim& d);
std::string shape_cpp(const Shape& s);
std::string dtype_cpp(rt::DType d);
std::string upper(std::string s);
std::string kernel_of(const Value& v);

// Unique, readable names for the tensor table: the body's variable names,
// numbered when a name is assigned again; TIDn for unnamed values.
std::vector<std::string> tensor_names(const Graph& g);
const char* role_of(const Value& v);

// The implementation of the build's optimizer for parameters of `rank`:
// the first of the build's devices that has one.
const spec::Impl* optimizer_impl(const spec::Spec& spec, const spec::Build& build, int rank);

// Tensors of optimizer state per parameter: momentum (sgd), or first and
// second moments (adam, adamw).
int optimizer_state_count(const spec::Optimizer& o);

// The trainable parameters step() updates: (index in params_, index in grads_).
std::vector<std::pair<std::size_t, std::size_t>> trainable(const Graph& g);
const spec::Impl* copy_impl(const spec::Spec& spec);
std::string init_kind(spec::Init::Kind k);
std::string fp(double v);

// C++ names of the output parameters of forward_into(): the where line's
// output names, with "_out" added where one equals an input's name.
std::vector<std::string> output_params(const Graph& g);

// Whether forward_into() may let the kernel that computes output k write
// into the caller's tensor (at run time also: contiguous, sharing no memory;
// rt::can_write_directly). Only a kernel result of its own that nothing
// writes in place later, returned once; never in a training build, whose
// pullback reads the forward values and must not see a caller's changes.
bool may_write_directly(const Graph& g, std::size_t k);

// The pullback after zero_grad() (Program::backward_fresh): the calls that
// add a product into a gradient buffer (accumulating GEMMs) and are the only
// calls of the pullback that touch that buffer, so storing their product
// (beta 0) gives the buffer's value from zero. Value ids.
std::set<int> stored_when_fresh(const Graph& g);
// The gradient buffers none of those calls writes (indices into
// Graph::grads): backward() clears them before the pullback after
// zero_grad(), which adds into them as the other pullback does.
std::vector<int> cleared_when_fresh(const Graph& g);

std::string training_declarations(const spec::Build& build);

// The inputs the caller passes as integers (a build's input_dtypes), in
// input order: the model holds each as the build's dtype.
std::vector<int> index_inputs(const Graph& g);
std::string index_members(const Graph& g);
std::string training_members(const spec::Build& build);

// The definitions of backward(), grad(), zero_grad() and step() of a build
// with backward: true (templates/model_training.cpp.in, model_step.cpp.in).
std::string training_definitions(const spec::Spec& spec, const spec::Build& build, const Graph& g, const std::string& cls);

}  // namespace wfgen::emit::detail
