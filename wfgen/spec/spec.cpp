#include "wfgen/spec/spec.hpp"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "wfgen/spec/schema_check.hpp"
#include "wfgen/spec/yaml_source.hpp"
#include "wfgen/support/names.hpp"

namespace wfgen::spec {

using detail::diag_at;
using detail::Source;
using detail::text_of;
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

const Node* Spec::find_node(std::string_view name) const {
  for (const auto& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

namespace {

// ---------------------------------------------------------------------------
// Typed reading (after validation: shapes of values are known to be right)

class Reader {
 public:
  Reader(const Source& src, std::vector<Diagnostic>& errors) : src_(src), errors_(errors) {}

  void read(const YAML::Node& root, Spec& spec) {
    if (!root["nodes"]) return;
    for (const auto& n : root["nodes"]) {
      std::optional<Node> node = read_node(n);
      if (node) spec.nodes.push_back(std::move(*node));
    }
  }

 private:
  void error(const YAML::Node& at, std::string message) { errors_.push_back(diag_at(src_, at, std::move(message))); }
  void error_at(SourceLoc loc, std::string message, int length) {
    Diagnostic d;
    d.loc = std::move(loc);
    d.message = std::move(message);
    d.source_line = line_of(src_.text, d.loc.line);
    d.length = length;
    errors_.push_back(std::move(d));
  }

  bool check_cpp_name(const YAML::Node& at, const std::string& name) {
    std::string problem = cpp_name_problem(name);
    if (problem.empty()) return true;
    error(at, problem);
    return false;
  }

  std::optional<ArgValue> read_value(const YAML::Node& v, ArgType type, const std::string& what) {
    auto scalar_int = [&](const YAML::Node& s) -> std::optional<std::int64_t> {
      std::int64_t x;
      if (s.IsScalar() && YAML::convert<std::int64_t>::decode(s, x)) return x;
      error(s, "expected an integer for " + what + ", but got " + yaml_kind(s));
      return std::nullopt;
    };
    auto scalar_float = [&](const YAML::Node& s) -> std::optional<double> {
      double x;
      if (s.IsScalar() && YAML::convert<double>::decode(s, x) && std::isfinite(x)) return x;
      error(s, "expected a finite number for " + what + ", but got " + yaml_kind(s));
      return std::nullopt;
    };
    switch (type) {
      case ArgType::Int: {
        auto x = scalar_int(v);
        if (x) return *x;
        return std::nullopt;
      }
      case ArgType::Float: {
        auto x = scalar_float(v);
        if (x) return *x;
        return std::nullopt;
      }
      case ArgType::Bool: {
        bool b;
        if (v.IsScalar() && YAML::convert<bool>::decode(v, b)) return b;
        error(v, "expected true or false for " + what + ", but got " + yaml_kind(v));
        return std::nullopt;
      }
      case ArgType::Ints:
      case ArgType::Floats: {
        if (!v.IsSequence()) {
          error(v, "expected a list for " + what + ", but got " + yaml_kind(v));
          return std::nullopt;
        }
        std::vector<std::int64_t> ints;
        std::vector<double> floats;
        for (const auto& item : v) {
          if (type == ArgType::Ints) {
            auto x = scalar_int(item);
            if (!x) return std::nullopt;
            ints.push_back(*x);
          } else {
            auto x = scalar_float(item);
            if (!x) return std::nullopt;
            floats.push_back(*x);
          }
        }
        if (type == ArgType::Ints) return ints;
        return floats;
      }
    }
    return std::nullopt;
  }

  std::vector<Arg> read_args(const YAML::Node& map, const std::string& owner, const char* kind) {
    std::vector<Arg> out;
    if (!map) return out;
    for (const auto& kv : map) {
      Arg a;
      a.name = kv.first.Scalar();
      a.loc = detail::loc_of(src_, kv.first.Mark());
      if (!subscript::is_symbol(a.name)) {
        error(kv.first, "invalid " + std::string(kind) + " name '" + quote(a.name) + "' of " + owner +
                            ": expected letters, digits, '_' and '-', starting with a letter or '_'");
        continue;
      }
      if (!check_cpp_name(kv.first, a.name)) continue;
      std::string type = kv.second["type"].Scalar();
      if (type == "int") a.type = ArgType::Int;
      else if (type == "float") a.type = ArgType::Float;
      else if (type == "bool") a.type = ArgType::Bool;
      else if (type == "ints") a.type = ArgType::Ints;
      else a.type = ArgType::Floats;
      if (kv.second["default"]) {
        a.default_value = read_value(kv.second["default"], a.type, "the default of '" + a.name + "' (" + type + ")");
        if (!a.default_value) continue;
      }
      if (kv.second["doc"]) a.doc = kv.second["doc"].Scalar();
      for (const auto& prev : out) {
        if (cpp_identifier(prev.name) == cpp_identifier(a.name)) {
          error(kv.first, "'" + a.name + "' and '" + prev.name + "' of " + owner +
                              " would be the same C++ name; rename one");
        }
      }
      out.push_back(std::move(a));
    }
    return out;
  }

  std::optional<Node> read_node(const YAML::Node& n) {
    Node node;
    node.name = n["name"].Scalar();
    node.loc = detail::loc_of(src_, n["name"].Mark());
    std::size_t errors_before = errors_.size();
    std::string owner = "node '" + node.name + "'";
    check_cpp_name(n["name"], node.name);
    node.args = read_args(n["args"], owner, "argument");
    node.slots = read_args(n["slots"], owner, "slot");
    node.where_text = text_of(src_, n["where"]);
    try {
      node.where = subscript::parse(node.where_text.value);
    } catch (const subscript::ParseError& e) {
      error_at(node.where_text.at(e.offset()), std::string("in the where of ") + owner + ": " + e.what(),
               static_cast<int>(e.length()));
      return std::nullopt;
    }
    if (n["save_for_backward"]) {
      for (const auto& f : n["save_for_backward"]) node.save_for_backward.push_back(f.as<bool>());
      if (node.save_for_backward.size() != node.where.inputs.size()) {
        error(n["save_for_backward"], "save_for_backward of " + owner + " has " +
                                          std::to_string(node.save_for_backward.size()) + " flags, but the node has " +
                                          std::to_string(node.where.inputs.size()) + " inputs (" +
                                          node.where_text.value.substr(0, node.where_text.value.find("->")) + ")");
      }
    }
    if (n["backward"]) {
      for (const auto& kv : n["backward"]) {
        std::string input = kv.first.Scalar();
        bool known = false;
        std::vector<std::string> names;
        for (const auto& a : node.where.inputs) {
          if (a.name) {
            names.push_back(*a.name);
            if (*a.name == input) known = true;
          }
        }
        if (!known) {
          error(kv.first, "backward of " + owner + " names '" + quote(input) + "', which is not an input" +
                              did_you_mean(input, names) + " (inputs: " + join(names) + ")");
          continue;
        }
        node.backward.emplace_back(input, text_of(src_, kv.second));
      }
    }
    if (n["out_scalar"]) node.out_scalar = n["out_scalar"].as<bool>();
    if (n["extends"])
      for (const auto& e : n["extends"]) node.extends.push_back(e.Scalar());
    if (n["doc"]) node.doc = n["doc"].Scalar();
    // Arguments and where bindings must not disagree with the subscripts.
    for (const auto& a : node.args) {
      for (const auto& b : node.where.where) {
        if (b.symbol == a.name) {
          error_at(node.where_text.at(b.offset),
                   "in the where of " + owner + ": '" + b.symbol +
                       "' is a constructor argument and cannot be bound again with 'where'",
                   static_cast<int>(b.symbol.size()));
        }
      }
    }
    if (errors_.size() != errors_before) return std::nullopt;
    return node;
  }

  const Source& src_;
  std::vector<Diagnostic>& errors_;
};

// Checks that involve several nodes (names are unique, extends refer to nodes).
void check_spec(const Spec& spec, std::vector<Diagnostic>& errors) {
  std::map<std::string, const Node*> by_name;
  for (const auto& n : spec.nodes) {
    auto [it, inserted] = by_name.emplace(lower_name(n.name), &n);
    if (!inserted) {
      Diagnostic d;
      d.loc = n.loc;
      d.message = "node '" + n.name + "' is defined twice (first at " + it->second->loc.str() + ")";
      if (lower_name(it->second->name) == lower_name(n.name) && it->second->name != n.name) {
        d.message = "node '" + n.name + "' and node '" + it->second->name + "' (" + it->second->loc.str() +
                    ") differ only in case, and generated names are lowercase; rename one";
      }
      errors.push_back(std::move(d));
    }
  }
  std::vector<std::string> names;
  for (const auto& n : spec.nodes) names.push_back(n.name);
  for (const auto& n : spec.nodes) {
    for (const auto& e : n.extends) {
      if (!spec.find_node(e)) {
        Diagnostic d;
        d.loc = n.loc;
        d.message = "node '" + n.name + "' extends '" + e + "', which is not a node" + did_you_mean(e, names);
        errors.push_back(std::move(d));
      }
    }
  }
}

void load_source(const Source& src, Spec& spec, std::vector<Diagnostic>& errors) {
  std::size_t before = errors.size();
  if (src.text.find('\0') != std::string::npos) {
    errors.push_back(Diagnostic{Diagnostic::Severity::Error, SourceLoc{src.name, 0, 0},
                                "this is not a text file (it contains NUL bytes); expected a YAML spec", "", 1, ""});
    return;
  }
  YAML::Node root = detail::parse_yaml(src, errors);
  if (errors.size() != before) return;
  if (!root || root.IsNull()) {
    errors.push_back(Diagnostic{Diagnostic::Severity::Error, SourceLoc{src.name, 1, 1},
                                "the spec file is empty; expected a mapping with 'nodes'", "", 1, ""});
    return;
  }
  if (!root.IsMap()) {
    errors.push_back(diag_at(src, root, "expected a mapping with 'nodes' at the top of the spec file, but got " + yaml_kind(root)));
    return;
  }
  detail::validate(src, root, errors);
  if (errors.size() != before) return;
  Reader(src, errors).read(root, spec);
}

}  // namespace

Spec load_text(const std::string& name, const std::string& text) {
  Spec spec;
  std::vector<Diagnostic> errors;
  Source src{name, text};
  spec.files.push_back(name);
  load_source(src, spec, errors);
  if (errors.empty()) check_spec(spec, errors);
  if (!errors.empty()) throw UserError(std::move(errors));
  return spec;
}

Spec load(const std::vector<std::filesystem::path>& files, const LoadOptions& options) {
  Spec spec;
  std::vector<Diagnostic> errors;
  for (const auto& path : files) {
    std::string name = path.string();
    spec.files.push_back(name);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      errors.push_back({Diagnostic::Severity::Error, SourceLoc{name, 0, 0}, "is a directory; expected a YAML spec file", "", 1, ""});
      continue;
    }
    auto size = std::filesystem::file_size(path, ec);
    if (ec) {
      errors.push_back({Diagnostic::Severity::Error, SourceLoc{name, 0, 0}, "cannot read the spec file: " + ec.message(), "", 1, ""});
      continue;
    }
    if (size > options.max_file_bytes) {
      errors.push_back({Diagnostic::Severity::Error, SourceLoc{name, 0, 0},
                        "the spec file is " + std::to_string(size) + " bytes, more than the limit of " +
                            std::to_string(options.max_file_bytes) + " bytes",
                        "", 1, ""});
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buf;
    buf << in.rdbuf();
    if (!in.good() && !in.eof()) {
      errors.push_back({Diagnostic::Severity::Error, SourceLoc{name, 0, 0}, "cannot read the spec file", "", 1, ""});
      continue;
    }
    load_source(Source{name, buf.str()}, spec, errors);
  }
  if (errors.empty()) check_spec(spec, errors);
  if (!errors.empty()) throw UserError(std::move(errors));
  return spec;
}

}  // namespace wfgen::spec
