#include "wfgen/spec/spec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "wfgen/body/body.hpp"
#include "wfgen/spec/reader.hpp"
#include "wfgen/spec/schema_check.hpp"
#include "wfgen/spec/yaml_source.hpp"
#include "wfgen/support/embedded.hpp"
#include "wfgen/support/names.hpp"

namespace wfgen::stdlib {
std::span<const wfgen::EmbeddedFile> files();
}

namespace wfgen::spec {

using detail::diag_at;
using detail::join;
using detail::Source;
using detail::text_of;
using detail::value_fits;
using detail::yaml_kind;

const char* arg_type_name(ArgType t) {
  switch (t) {
    case ArgType::Int: return "int";
    case ArgType::Float: return "float";
    case ArgType::Bool: return "bool";
    case ArgType::Ints: return "ints";
    case ArgType::Floats: return "floats";
  }
  return "?";
}

std::string arg_value_str(const ArgValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) os << (x ? "true" : "false");
        else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>) os << x;
        else {
          os << "(";
          for (std::size_t i = 0; i < x.size(); ++i) os << (i ? " " : "") << x[i];
          os << ")";
        }
      },
      v);
  return os.str();
}

const char* body_kind_name(BodyKind k) {
  switch (k) {
    case BodyKind::Elementwise: return "elementwise";
    case BodyKind::Reduce: return "reduce";
    case BodyKind::Gemm: return "gemm";
    case BodyKind::Cpp: return "cpp";
    case BodyKind::Builtin: return "builtin";
    case BodyKind::View: return "view";
    case BodyKind::Build: return "build";
    case BodyKind::Fused: return "fused";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
  }
  return "?";
}

const Model* Spec::find_model(std::string_view name) const {
  for (const auto& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

const Build* Spec::find_build(std::string_view name) const {
  for (const auto& b : builds)
    if (b.name == name) return &b;
  return nullptr;
}

bool Node::takes_indices(std::string_view input) const {
  return std::find(indices.begin(), indices.end(), input) != indices.end();
}

std::optional<rt::DType> Build::input_dtype(std::string_view input) const {
  for (const auto& [name, dt] : input_dtypes)
    if (name == input) return dt;
  return std::nullopt;
}

std::optional<rt::DType> Build::typed_input(std::string_view input) const {
  for (const auto& [name, dt] : typed_inputs)
    if (name == input) return dt;
  return std::nullopt;
}

std::string Spec::line_at(const SourceLoc& loc) const {
  auto it = texts.find(loc.file);
  return it == texts.end() ? std::string() : line_of(it->second, loc.line);
}

std::vector<const Impl*> Spec::impls_of(std::string_view node) const {
  std::vector<const Impl*> out;
  for (const auto& i : impls)
    if (i.node == node) out.push_back(&i);
  return out;
}

const Node* Spec::find_node(std::string_view name) const {
  for (const auto& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

namespace {


// A user node replaces the standard node of the same name (and the standard
// implementations of it); a user impl replaces the standard impl of the
// same node and device.
void apply_overrides(Spec& spec) {
  std::set<std::string> user_nodes;
  std::set<std::pair<std::string, std::string>> user_impls;
  for (const auto& n : spec.nodes)
    if (!n.from_stdlib) user_nodes.insert(n.name);
  for (const auto& i : spec.impls)
    if (!i.from_stdlib) user_impls.insert({i.node, i.device});
  std::erase_if(spec.nodes, [&](const Node& n) { return n.from_stdlib && user_nodes.count(n.name); });
  std::set<std::string> user_models;
  for (const auto& m : spec.models)
    if (!m.from_stdlib) user_models.insert(m.name);
  std::erase_if(spec.models, [&](const Model& m) { return m.from_stdlib && user_models.count(m.name); });
  std::erase_if(spec.impls, [&](const Impl& i) {
    return i.from_stdlib && (user_nodes.count(i.node) || user_impls.count({i.node, i.device}));
  });
}

Diagnostic located(SourceLoc loc, std::string message);

// defmodel-as :asif :node: a build with `as: node` becomes a node named
// after it, whose shapes are the model's where line with the build's
// arguments filled in, and whose one cpu implementation runs the build's
// generated class.
void add_build_nodes(Spec& spec, std::vector<Diagnostic>& errors) {
  for (const auto& b : spec.builds) {
    if (!b.as_node) continue;
    const Model* m = spec.find_model(b.model);
    if (!m || !m->where) continue;  // reported by check_spec
    subscript::Declaration d = *m->where;
    d.where.clear();
    auto fill = [&](std::vector<subscript::Argument>& args) {
      for (auto& a : args) {
        for (auto& s : a.dims) {
          if (s.kind != subscript::Subscript::Kind::Symbol) continue;
          for (const auto& [name, value] : b.args) {
            if (name != s.name) continue;
            if (const auto* i = std::get_if<std::int64_t>(&value)) {
              s.kind = subscript::Subscript::Kind::Integer;
              s.value = *i;
            }
          }
          for (const auto& a2 : m->args) {
            if (a2.name != s.name || s.kind != subscript::Subscript::Kind::Symbol || !a2.default_value) continue;
            if (const auto* i = std::get_if<std::int64_t>(&*a2.default_value)) {
              s.kind = subscript::Subscript::Kind::Integer;
              s.value = *i;
            }
          }
        }
      }
    };
    fill(d.inputs);
    fill(d.outputs);
    Node n;
    n.name = b.name;
    n.loc = b.loc;
    try {
      n.where = subscript::parse(d.str());
    } catch (const subscript::ParseError& e) {
      errors.push_back(located(b.loc, std::string("build '") + b.name + "' as a node: " + e.what()));
      continue;
    }
    n.where_text.value = n.where.str();
    n.where_text.loc = b.loc;
    n.where_text.exact = false;
    n.doc = "build '" + b.name + "' of model '" + m->name + "' as a node";
    Impl impl;
    impl.node = b.name;
    impl.device = "cpu";
    impl.loc = b.loc;
    impl.dtypes = {b.dtype};
    impl.ranks = {static_cast<int>(n.where.outputs.empty() ? 0 : n.where.outputs.front().dims.size())};
    impl.kind = BodyKind::Build;
    impl.build = b.name;
    spec.nodes.push_back(std::move(n));
    spec.impls.push_back(std::move(impl));
  }
}

Diagnostic located(SourceLoc loc, std::string message) {
  Diagnostic d;
  d.loc = std::move(loc);
  d.message = std::move(message);
  return d;
}

// Checks that involve several entries: unique names, references that exist.
// One method a kind of entry, run in the order of the spec's sections so the
// errors come out in that order.
class SpecChecker {
 public:
  SpecChecker(const Spec& spec, const std::map<std::string, std::string>& texts, std::vector<Diagnostic>& errors)
      : spec_(spec), texts_(texts), errors_(errors) {
    for (const auto& n : spec.nodes) node_names_.push_back(n.name);
    for (const auto& m : spec.models) model_names_.push_back(m.name);
  }

  void run() {
    check_nodes();
    check_models();
    for (const auto& b : spec_.builds) check_build_args(b);
    check_impls();
    // Autodiff keys of builds.
    for (const auto& b : spec_.builds) {
      check_autodiff_keys(b);
      if (b.optimizer) check_optimizer(b, *b.optimizer);
    }
  }

 private:
  void add(SourceLoc loc, std::string message, int length = 1) {
    Diagnostic d = located(std::move(loc), std::move(message));
    d.length = length;
    auto it = texts_.find(d.loc.file);
    if (it != texts_.end()) d.source_line = line_of(it->second, d.loc.line);
    errors_.push_back(std::move(d));
  }

  // Unique names (generated names are lowercase), and what they extend.
  void check_nodes() {
    std::map<std::string, const Node*> by_name;
    for (const auto& n : spec_.nodes) {
      auto [it, inserted] = by_name.emplace(lower_name(n.name), &n);
      if (inserted) continue;
      if (it->second->name != n.name) {
        add(n.loc, "node '" + n.name + "' and node '" + it->second->name + "' (" + it->second->loc.str() +
                       ") differ only in case, and generated names are lowercase; rename one");
      } else {
        add(n.loc, "node '" + n.name + "' is defined twice (first at " + it->second->loc.str() + ")");
      }
    }
    for (const auto& n : spec_.nodes) {
      for (std::size_t k = 0; k < n.extends.size(); ++k) {
        const std::string& e = n.extends[k];
        SourceLoc at = k < n.extends_locs.size() ? n.extends_locs[k] : n.loc;
        int len = static_cast<int>(e.size());
        if (!spec_.find_node(e)) add(at, "node '" + n.name + "' extends '" + e + "', which is not a node" + did_you_mean(e, node_names_), len);
        if (e == n.name) add(at, "node '" + n.name + "' extends itself", len);
      }
    }
  }

  void check_models() {
    std::map<std::string, const Model*> models;
    for (const auto& m : spec_.models) {
      auto [it, inserted] = models.emplace(m.name, &m);
      if (!inserted) add(m.loc, "model '" + m.name + "' is defined twice (first at " + it->second->loc.str() + ")");
      if (spec_.find_node(m.name)) add(m.loc, "model '" + m.name + "' has the name of a node; calls would be ambiguous");
    }
  }

  // A build's name, its model, and the model's arguments it sets.
  void check_build_args(const Build& b) {
    auto [it, inserted] = builds_.emplace(lower_name(b.name), &b);
    if (!inserted) add(b.loc, "build '" + b.name + "' is defined twice (first at " + it->second->loc.str() + ")");
    const Model* m = spec_.find_model(b.model);
    if (!m) {
      add(b.model_loc, "build '" + b.name + "' uses unknown model '" + b.model + "'" + did_you_mean(b.model, model_names_));
      return;
    }
    if (!m->where) {
      add(b.model_loc, "build '" + b.name + "': model '" + m->name +
                           "' has no where line, so the shapes of its inputs are unknown; add one such as \"X[batch in] -> Y[batch out]\"");
    }
    std::vector<std::string> arg_names;
    for (const auto& a : m->args) arg_names.push_back(a.name);
    for (const auto& [name, value] : b.args) {
      bool known = false;
      for (const auto& a : m->args) {
        if (a.name != name) continue;
        known = true;
        if (!value_fits(value, a.type)) {
          add(b.arg_locs.at(name), "build '" + b.name + "' sets '" + name + "' to " + arg_value_str(value) +
                                       ", but the argument of model '" + m->name + "' is " + arg_type_name(a.type) +
                                       (a.type == ArgType::Int || a.type == ArgType::Ints
                                            ? " (integers from -9223372036854775808 to 9223372036854775807)"
                                            : ""));
        }
      }
      if (!known) add(b.arg_locs.at(name), "build '" + b.name + "' sets '" + quote(name) + "', which is not an argument of model '" +
                                                m->name + "'" + did_you_mean(name, arg_names));
    }
    for (const auto& a : m->args) {
      bool given = false;
      for (const auto& [name, value] : b.args) given = given || name == a.name;
      if (!given && !a.default_value) {
        add(b.loc, "build '" + b.name + "' does not set the argument '" + a.name + "' of model '" + m->name + "', which has no default");
      }
    }
  }

  // Each implementation: of a known node, one a device, its backward's inputs.
  void check_impls() {
    std::map<std::pair<std::string, std::string>, const Impl*> impls;
    for (const auto& i : spec_.impls) {
      const Node* node = spec_.find_node(i.node);
      if (!node) {
        add(i.loc, "implementation of unknown node '" + i.node + "'" + did_you_mean(i.node, node_names_), static_cast<int>(i.node.size()));
        continue;
      }
      auto [it, inserted] = impls.emplace(std::make_pair(i.node, i.device), &i);
      if (!inserted) {
        add(i.loc, "node '" + i.node + "' has two implementations for the device '" + i.device + "' (the first at " +
                       it->second->loc.str() + ")");
      }
      if (i.kind == BodyKind::Elementwise && node->where.outputs.size() != 1) {
        add(i.loc, "an elementwise kernel computes one output, but node '" + i.node + "' has " +
                       std::to_string(node->where.outputs.size()) + " (" + node->where.str() + ")");
      }
      for (const auto& [input, text] : i.backward) {
        std::vector<std::string> inputs;
        for (const auto& a : node->where.inputs)
          if (a.name) inputs.push_back(*a.name);
        if (std::find(inputs.begin(), inputs.end(), input) == inputs.end()) {
          add(text.loc, "the backward of the " + i.device + " implementation of '" + i.node + "' gives a gradient for '" +
                            quote(input) + "', which is not an input of the node" + did_you_mean(input, inputs) + " (inputs: " +
                            join(inputs) + ")");
        }
      }
    }
  }

  // backward, grad_inputs and input_dtypes of a build against its model's inputs.
  void check_autodiff_keys(const Build& b) {
    const Model* m = spec_.find_model(b.model);
    if (!b.backward && (!b.grad_inputs.empty() || b.optimizer)) {
      add(b.loc, "build '" + b.name + "' sets " + (b.optimizer ? "an optimizer" : "grad_inputs") +
                     ", which needs 'backward: true' (there is no pullback without it)");
    }
    if (!m) return;
    // input_dtypes and typed_inputs both name inputs of the model; false
    // (and an error) where `name` is not one.
    auto is_input = [&](const std::string& name, const SourceLoc& at) {
      if (std::find(m->inputs.begin(), m->inputs.end(), name) != m->inputs.end()) return true;
      add(at, "build '" + b.name + "' gives a dtype to '" + quote(name) + "', which is not an input of model '" + m->name + "'" +
                  did_you_mean(name, m->inputs) + " (inputs: " + join(m->inputs) + ")",
          static_cast<int>(name.size()));
      return false;
    };
    for (const auto& [name, dt] : b.input_dtypes) {
      const SourceLoc& at = b.input_dtype_locs.at(name);
      if (is_input(name, at) && std::find(b.grad_inputs.begin(), b.grad_inputs.end(), name) != b.grad_inputs.end()) {
        add(at, "build '" + b.name + "' asks for the gradient of '" + quote(name) + "', an input of integer dtype " +
                    rt::dtype_name(dt) + " (indices have no gradient); remove it from grad_inputs",
            static_cast<int>(name.size()));
      }
    }
    for (const auto& [name, dt] : b.typed_inputs) {
      const SourceLoc& at = b.typed_input_locs.at(name);
      if (!is_input(name, at)) continue;
      if (b.input_dtype(name)) {
        add(at, "build '" + b.name + "' lists '" + quote(name) + "' in both input_dtypes (converted to " + rt::dtype_name(b.dtype) +
                    ") and typed_inputs (held as " + rt::dtype_name(dt) + "); keep one",
            static_cast<int>(name.size()));
      } else if (dt != rt::DType::f32 && dt != rt::DType::f64 &&
                 std::find(b.grad_inputs.begin(), b.grad_inputs.end(), name) != b.grad_inputs.end()) {
        add(at, "build '" + b.name + "' asks for the gradient of '" + quote(name) + "', an input of integer dtype " +
                    rt::dtype_name(dt) + " (integer tensors have no gradient); remove it from grad_inputs",
            static_cast<int>(name.size()));
      }
    }
    for (std::size_t k = 0; k < b.grad_inputs.size(); ++k) {
      if (std::find(m->inputs.begin(), m->inputs.end(), b.grad_inputs[k]) == m->inputs.end()) {
        add(b.grad_input_locs[k], "build '" + b.name + "' asks for the gradient of '" + quote(b.grad_inputs[k]) +
                                      "', which is not an input of model '" + m->name + "'" +
                                      did_you_mean(b.grad_inputs[k], m->inputs) + " (inputs: " + join(m->inputs) + ")",
            static_cast<int>(b.grad_inputs[k].size()));
      }
    }
  }

  // The optimizer is a node; the hyper-parameters set are its float and bool
  // arguments (not `step`), and those without a default are set.
  void check_optimizer(const Build& b, const Optimizer& o) {
    const Node* node = spec_.find_node(o.node);
    if (!node) {
      add(o.loc, "the optimizer '" + o.node + "' of build '" + b.name + "' is not a node (the standard library has sgd, adam, adamw)");
      return;
    }
    std::vector<std::string> settable;
    for (const auto& a : node->args)
      if (a.name != "step") settable.push_back(a.name);
    for (const auto& [name, value] : o.values) {
      const Arg* arg = nullptr;
      for (const auto& a : node->args)
        if (a.name == name && a.name != "step") arg = &a;
      if (!arg) {
        add(o.locs.at(name), "the optimizer '" + o.node + "' has no hyper-parameter '" + quote(name) + "'" +
                                 did_you_mean(name, settable) + " (it has: " + join(settable) + ")",
            static_cast<int>(name.size()));
      } else if (arg->type == ArgType::Float && !std::holds_alternative<double>(value)) {
        add(o.locs.at(name), "the hyper-parameter '" + name + "' of optimizer '" + o.node + "' is a number, not true/false");
      } else if (arg->type == ArgType::Bool && !std::holds_alternative<bool>(value)) {
        add(o.locs.at(name), "the hyper-parameter '" + name + "' of optimizer '" + o.node + "' is true or false, not a number");
      } else if (arg->type != ArgType::Float && arg->type != ArgType::Bool) {
        add(o.locs.at(name), "the hyper-parameter '" + name + "' of optimizer '" + o.node + "' is " + arg_type_name(arg->type) +
                                 "; only float and bool hyper-parameters can be set");
      } else if (const double* x = std::get_if<double>(&value); x && !std::isfinite(*x)) {
        add(o.locs.at(name), "the hyper-parameter '" + name + "' of optimizer '" + o.node + "' must be a finite number");
      }
    }
    for (const auto& a : node->args) {
      bool given = false;
      for (const auto& [name, value] : o.values) given = given || name == a.name;
      if (!given && !a.default_value && a.name != "step") {
        add(o.loc, "the optimizer '" + o.node + "' of build '" + b.name + "' needs its hyper-parameter '" + a.name + "'");
      }
    }
  }

  const Spec& spec_;
  const std::map<std::string, std::string>& texts_;
  std::vector<Diagnostic>& errors_;
  std::vector<std::string> node_names_, model_names_;
  std::map<std::string, const Build*> builds_;  // by lowercase name
};

void check_spec(const Spec& spec, const std::map<std::string, std::string>& texts, std::vector<Diagnostic>& errors) {
  SpecChecker(spec, texts, errors).run();
}

// The offset of the first byte of `text` that is not part of well-formed
// UTF-8 (no overlong forms, no surrogates, at most U+10FFFF), or npos.
std::size_t invalid_utf8_at(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    unsigned char c = b(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return i;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (b(i + 1) < lo || b(i + 1) > hi) return i;
    for (std::size_t k = 2; k < n; ++k)
      if ((b(i + k) & 0xC0) != 0x80) return i;
    i += n;
  }
  return std::string_view::npos;
}

// Problems of the bytes of a file before it is parsed as YAML: a UTF-16 or
// UTF-32 file, NUL bytes (a binary file), bytes that are not UTF-8.
bool check_encoding(const Source& src, std::vector<Diagnostic>& errors) {
  auto refuse = [&](std::size_t offset, std::string message) {
    errors.push_back(Diagnostic{Diagnostic::Severity::Error, loc_of_offset(src.name, src.text, offset), std::move(message), "", 1, ""});
    return false;
  };
  std::string_view t = src.text;
  if (t.starts_with("\xFF\xFE") || t.starts_with("\xFE\xFF") || t.starts_with(std::string_view("\0\0\xFE\xFF", 4))) {
    return refuse(0, "this file is UTF-16 or UTF-32 (it starts with a byte-order mark); expected a YAML spec in UTF-8");
  }
  if (std::size_t nul = t.find('\0'); nul != std::string_view::npos) {
    return refuse(nul, "this is not a text file (it contains a NUL byte); expected a YAML spec");
  }
  if (std::size_t bad = invalid_utf8_at(t); bad != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(t[bad]));
    return refuse(bad, std::string("this file is not valid UTF-8 (the byte ") + byte +
                           " cannot start or continue a character here); expected a YAML spec in UTF-8");
  }
  return true;
}

void load_source(const Source& src, Spec& spec, std::vector<Diagnostic>& errors) {
  std::size_t before = errors.size();
  if (!check_encoding(src, errors)) return;
  YAML::Node root = detail::parse_yaml(src, errors);
  if (errors.size() != before) return;
  if (!root || root.IsNull()) {
    // Only comments, or text the YAML reader stopped at without a value (a
    // leading ',' ends its document): say which.
    std::size_t at = 0;
    while (at < src.text.size()) {
      at = src.text.find_first_not_of(" \t\r\n", at);
      if (at == std::string::npos || src.text[at] != '#') break;
      at = src.text.find('\n', at);
    }
    if (at == std::string::npos || at >= src.text.size() || src.text.compare(at, 3, "---") == 0) {
      errors.push_back(Diagnostic{Diagnostic::Severity::Error, SourceLoc{src.name, 1, 1},
                                  "the spec file is empty; expected a mapping with 'nodes'", "", 1, ""});
    } else {
      SourceLoc loc = loc_of_offset(src.name, src.text, at);
      errors.push_back(Diagnostic{Diagnostic::Severity::Error, loc,
                                  "YAML syntax error: unexpected '" + quote(src.text.substr(at, 1)) +
                                      "' where the document starts; expected a mapping with 'nodes'",
                                  line_of(src.text, loc.line), 1, ""});
    }
    return;
  }
  if (!root.IsMap()) {
    errors.push_back(diag_at(src, root, "expected a mapping with 'nodes' at the top of the spec file, but got " + yaml_kind(root)));
    return;
  }
  detail::validate(src, root, errors);
  if (errors.size() != before) return;
  detail::read_document(src, root, spec, errors);
}

}  // namespace

namespace {

// The standard library's files loaded once a process and copied into each
// spec that starts with them: parsing and validating its 50 KB of YAML was
// most of the time of a spec's load (a bad spec's `wfgen gen` in-process:
// ~45 ms of ~50; about 1 s under the sanitizers, where test_spec's and
// test_models' corpora of bad specs took minutes). Loaded into an empty spec
// as before, so the copy is what loading them first made.
struct StdlibPart {
  Spec spec;
  std::vector<Diagnostic> errors;  // none, unless the embedded files are broken
};

const StdlibPart& stdlib_part() {
  static const StdlibPart part = [] {
    StdlibPart p;
    for (const auto& f : stdlib::files()) {
      Source src{"<stdlib>/" + std::string(f.path), std::string(f.text)};
      p.spec.files.push_back(src.name);
      p.spec.texts[src.name] = src.text;
      load_source(src, p.spec, p.errors);
    }
    for (auto& n : p.spec.nodes) n.from_stdlib = true;
    for (auto& i : p.spec.impls) i.from_stdlib = true;
    for (auto& m : p.spec.models) m.from_stdlib = true;
    return p;
  }();
  return part;
}

// `sources` in order, after the standard library's files if `with_stdlib`.
Spec load_sources(const std::vector<Source>& sources, bool with_stdlib, std::vector<Diagnostic> errors) {
  Spec spec;
  if (with_stdlib) {
    spec = stdlib_part().spec;
    errors.insert(errors.end(), stdlib_part().errors.begin(), stdlib_part().errors.end());
  }
  std::map<std::string, std::string> texts = std::move(spec.texts);
  for (const Source& src : sources) {
    spec.files.push_back(src.name);
    texts[src.name] = src.text;
    load_source(src, spec, errors);
  }
  if (errors.empty()) {
    apply_overrides(spec);
    add_build_nodes(spec, errors);
    check_spec(spec, texts, errors);
  }
  spec.texts = std::move(texts);
  if (!errors.empty()) throw UserError(std::move(errors));
  return spec;
}

// Reads files; problems reading them become diagnostics.
std::vector<Source> read_files(const std::vector<std::filesystem::path>& files, const LoadOptions& options,
                               std::vector<Diagnostic>& errors) {
  std::vector<Source> out;
  for (const auto& path : files) {
    std::string name = path.string();
    auto fail = [&](std::string message) { errors.push_back(located(SourceLoc{name, 0, 0}, std::move(message))); };
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      fail("is a directory; expected a YAML spec file");
      continue;
    }
    auto size = std::filesystem::file_size(path, ec);
    if (ec) {
      fail("cannot read the spec file: " + ec.message());
      continue;
    }
    if (size > options.max_file_bytes) {
      fail("the spec file is " + std::to_string(size) + " bytes, more than the limit of " +
           std::to_string(options.max_file_bytes) + " bytes");
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buf;
    buf << in.rdbuf();
    if (!in.good() && !in.eof()) {
      fail("cannot read the spec file");
      continue;
    }
    out.push_back(Source{name, buf.str()});
  }
  return out;
}

}  // namespace

Spec load_text(const std::string& name, const std::string& text) { return load_sources({Source{name, text}}, false, {}); }

Spec load(const std::vector<std::filesystem::path>& files, const LoadOptions& options) {
  std::vector<Diagnostic> errors;
  std::vector<Source> sources = read_files(files, options, errors);
  return load_sources(sources, false, std::move(errors));
}

std::vector<std::string> stdlib_files() {
  std::vector<std::string> out;
  for (const auto& f : stdlib::files()) out.push_back("<stdlib>/" + std::string(f.path));
  return out;
}

Spec load_with_stdlib(const std::vector<std::filesystem::path>& files, const LoadOptions& options) {
  std::vector<Diagnostic> errors;
  std::vector<Source> sources = read_files(files, options, errors);
  return load_sources(sources, true, std::move(errors));
}

Spec load_text_with_stdlib(const std::string& name, const std::string& text) {
  return load_sources({Source{name, text}}, true, {});
}

}  // namespace wfgen::spec
