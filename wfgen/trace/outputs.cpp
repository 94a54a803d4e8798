// The tensors a model's body returns against the outputs of its where line
// (issue 13): count, rank and every dim, with the symbols the inputs and
// arguments bind. Split out of trace.cpp; the tracer calls check_outputs()
// after each model it traces.
#include <algorithm>

#include "wfgen/shape/shape.hpp"
#include "wfgen/trace/tvalue.hpp"

namespace wfgen::trace::detail {

using shape::Dim;
using shape::Shape;

const char* kind_word(TValue::Kind k) {
  switch (k) {
    case TValue::Kind::None: return "nothing";
    case TValue::Kind::Tensor: return "a tensor";
    case TValue::Kind::Int: return "an integer";
    case TValue::Kind::Float: return "a float";
    case TValue::Kind::Bool: return "a bool";
    case TValue::Kind::List: return "a list";
    case TValue::Kind::Sym: return "a size known only at run time";
    case TValue::Kind::Cond: return "a condition on sizes known only at run time";
    case TValue::Kind::Unknown: return "an argument without a value";
  }
  return "?";
}

namespace {

// True when the dims can differ: different sizes, or symbolic expressions
// that give different sizes for some values of their run-time symbols.
// `expected` is "?" (any) where the where line leaves an output dim to the
// body (conv2d's h_out).
bool dims_differ(const Dim& expected, const Dim& got) {
  if (!expected.is_known() && (expected.str() == "?" || expected.str() == "~")) return false;
  if (expected == got) return false;
  if (expected.is_known() && got.is_known()) return true;
  std::vector<std::string> names = expected.symbols();
  for (const auto& n : got.symbols())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  // Three sets of distinct values; an expression that divides by zero or
  // overflows for one set is judged by the others.
  for (std::int64_t base : {2, 17, 101}) {
    auto lookup = [&](const std::string& name) -> std::optional<Dim> {
      auto k = static_cast<std::int64_t>(std::find(names.begin(), names.end(), name) - names.begin());
      return Dim(base + k * (base % 7 + 3));
    };
    try {
      Dim a = expected.substitute(lookup), b = got.substitute(lookup);
      if (a.is_known() && b.is_known() && a.value() != b.value()) return true;
    } catch (const std::exception&) {
      continue;
    }
  }
  return false;
}

// The subscript of `arg` that axis `axis` of a predicted shape of `rank`
// dims comes from: "n", "~" or "" (an integer).
std::string subscript_at(const subscript::Argument& arg, std::size_t axis, std::size_t rank) {
  const auto& dims = arg.dims;
  std::size_t batch = dims.size();
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (dims[i].kind == subscript::Subscript::Kind::Batch) batch = i;
  const subscript::Subscript* s = nullptr;
  if (batch == dims.size()) {
    if (rank == dims.size()) s = &dims[axis];
  } else if (axis < batch) {
    s = &dims[axis];
  } else if (rank + 1 >= dims.size() && axis + (dims.size() - batch - 1) >= rank) {
    s = &dims[dims.size() - (rank - axis)];
  } else {
    return "~";
  }
  if (!s || s->kind == subscript::Subscript::Kind::Integer) return "";
  return s->kind == subscript::Subscript::Kind::Batch ? "~" : s->name;
}

std::string ordinal(std::size_t n) {
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// The tensors a model's body returned against the outputs of its where
// line: their count, and the rank and every dim of each, with symbols
// bound by the inputs (and arguments) as the where line binds them. A
// Shape-Error report at the return statement, with notes at the where
// line's output and, for a model called by another, at the call.
}  // namespace

void check_outputs(const spec::Spec& spec, const spec::Model& m, const Declared& in, const std::vector<TValue>& results,
                   const std::vector<Shape>& shapes, const std::optional<Returned>& ret) {
  const subscript::Declaration& decl = *m.where;
  const shape::CheckResult predicted = shape::check(decl, in.args, in.inputs);
  std::vector<Shape> returned;
  for (std::size_t k = 0; k < results.size(); ++k)
    returned.push_back(results[k].kind == TValue::Kind::Tensor && k < shapes.size() ? shapes[k] : Shape{Dim::symbol("?")});
  std::vector<shape::Report> reports;
  std::string message;
  std::size_t culprit = 0;  // the output the notes point at
  auto declared_str = [&](std::size_t k) {
    return decl.outputs[k].str() + " = " + shape::shape_str(predicted.outputs[k].shape);
  };
  if (results.size() != decl.outputs.size()) {
    std::string outs;
    for (const auto& o : decl.outputs) outs += (outs.empty() ? "" : " ") + o.str();
    message = "model '" + m.name + "' returns " + std::to_string(results.size()) + " result" + (results.size() == 1 ? "" : "s") +
              ", but its where line declares " + std::to_string(decl.outputs.size()) + " output" +
              (decl.outputs.size() == 1 ? "" : "s") + ": " + outs;
    reports.push_back({"", "Couldn't step forward: the model declares " + std::to_string(decl.outputs.size()) + " output" +
                               (decl.outputs.size() == 1 ? "" : "s") + " (" + outs + "), but its body returns " +
                               std::to_string(results.size()) + ": " + shape::shapes_str(returned) + ".",
                       std::nullopt, 1});
  } else {
    for (std::size_t k = 0; k < results.size(); ++k) {
      const subscript::Argument& arg = decl.outputs[k];
      const Shape& want = predicted.outputs[k].shape;
      const std::string label = "the " + ordinal(k + 1) + " output " + arg.str();
      const std::string name = arg.name ? *arg.name : arg.str();
      std::string first;
      if (results[k].kind != TValue::Kind::Tensor) {
        first = "model '" + m.name + "' returns " + kind_word(results[k].kind) + " as its output " + name +
                ", but its where line declares the tensor " + arg.str();
        reports.push_back({name, "Couldn't identify " + label + ": the body returns " + kind_word(results[k].kind) +
                                     ", not a tensor.",
                           arg.offset, arg.length});
      } else if (want.size() != returned[k].size()) {
        first = "model '" + m.name + "' returns " + name + " with shape " + shape::shape_str(returned[k]) +
                ", but its where line declares " + declared_str(k);
        reports.push_back({name, "Couldn't identify the rank of " + label + ": it needs " + std::to_string(want.size()) +
                                     " dim" + (want.size() == 1 ? "" : "s") + ", but got " +
                                     std::to_string(returned[k].size()) + ".\n Expected " + declared_str(k) +
                                     ", but got: " + shape::shape_str(returned[k]),
                           arg.offset, arg.length});
      } else {
        for (std::size_t axis = 0; axis < want.size(); ++axis) {
          if (!dims_differ(want[axis], returned[k][axis])) continue;
          if (first.empty()) {
            first = "model '" + m.name + "' returns " + name + " with shape " + shape::shape_str(returned[k]) +
                    ", but its where line declares " + declared_str(k);
          }
          std::string sub = subscript_at(arg, axis, want.size());
          std::string what = sub.empty() ? "axis " + std::to_string(axis) : sub;
          reports.push_back({sub, "Couldn't identify " + what + " of " + label + ": " + what + " is determined as " +
                                      (want[axis].is_known() ? "" : "the run-time dim ") + want[axis].str() + "\n but got: " + returned[k][axis].str() + " at axis " +
                                      std::to_string(axis) + ".\n Expected " + declared_str(k) + ", but got: " +
                                      shape::shape_str(returned[k]),
                             arg.offset, arg.length});
        }
      }
      if (message.empty() && !first.empty()) {
        message = first;
        culprit = k;
      }
    }
  }
  if (reports.empty()) return;
  shape::CheckResult r;
  r.outputs = predicted.outputs;
  r.reports = std::move(reports);
  shape::CheckOptions o;
  o.operation = m.name;
  o.kind = "Model";
  o.returned = returned;
  Diagnostic d;
  d.loc = ret ? ret->loc : m.where_text->loc;
  d.length = ret ? ret->length : 1;
  d.message = message;
  d.source_line = spec.line_at(d.loc);
  d.detail = shape::render_report(decl, in.inputs, r, o);
  std::vector<Diagnostic> all{d};
  Diagnostic where;
  where.severity = Diagnostic::Severity::Note;
  const subscript::Argument& out = decl.outputs[std::min(culprit, decl.outputs.size() - 1)];
  where.loc = m.where_text->at(out.offset);
  where.length = static_cast<int>(std::max<std::size_t>(1, out.length));
  where.message = "the where line of model '" + m.name + "' declares " + out.str() + " here";
  where.source_line = spec.line_at(where.loc);
  all.push_back(std::move(where));
  throw UserError(std::move(all));
}


}  // namespace wfgen::trace::detail
