// The typed reading of a spec document (reader.hpp): after validation, the
// values have the right shapes; here they become typed nodes, impls, models,
// paths and builds, with the checks the schema cannot express.
#include "wfgen/spec/reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "wfgen/body/body.hpp"
#include "wfgen/spec/schema_check.hpp"
#include "wfgen/support/names.hpp"

namespace wfgen::spec::detail {

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

bool value_fits(const ArgValue& v, ArgType t) {
  switch (t) {
    case ArgType::Int: return std::holds_alternative<std::int64_t>(v);
    case ArgType::Float: return std::holds_alternative<std::int64_t>(v) || std::holds_alternative<double>(v);
    case ArgType::Bool: return std::holds_alternative<bool>(v);
    case ArgType::Ints: return std::holds_alternative<std::vector<std::int64_t>>(v);
    case ArgType::Floats:
      return std::holds_alternative<std::vector<std::int64_t>>(v) || std::holds_alternative<std::vector<double>>(v);
  }
  return false;
}

namespace {

// Where `file` really is when symbolic links lead it out of `base` (both
// resolved through links), or nullopt when it stays inside or cannot be
// resolved (a missing file is reported when it is read).
std::optional<std::filesystem::path> resolved_outside(const std::filesystem::path& base, const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::path real_base = std::filesystem::weakly_canonical(std::filesystem::absolute(base.empty() ? "." : base, ec), ec);
  if (ec) return std::nullopt;
  std::filesystem::path real_file = std::filesystem::weakly_canonical(std::filesystem::absolute(file, ec), ec);
  if (ec) return std::nullopt;
  std::filesystem::path rel = real_file.lexically_relative(real_base);
  if (!rel.empty() && *rel.begin() != "..") return std::nullopt;
  return real_file;
}

class Reader {
 public:
  Reader(const Source& src, std::vector<Diagnostic>& errors) : src_(src), errors_(errors) {}

  void read(const YAML::Node& root, Spec& spec) {
    if (root["nodes"]) {
      for (const auto& n : root["nodes"]) {
        std::optional<Node> node = read_node(n);
        if (node) spec.nodes.push_back(std::move(*node));
      }
    }
    if (root["ops"]) {
      // define-op: a node and its one implementation in one entry.
      for (const auto& n : root["ops"]) {
        std::optional<Node> node = read_node(n);
        std::optional<Impl> impl = read_impl(n, n["name"]);
        if (node && impl) {
          spec.nodes.push_back(std::move(*node));
          spec.impls.push_back(std::move(*impl));
        }
      }
    }
    if (root["impls"]) {
      for (const auto& n : root["impls"]) {
        std::optional<Impl> impl = read_impl(n, n["node"]);
        if (impl) spec.impls.push_back(std::move(*impl));
      }
    }
    if (root["models"]) {
      for (const auto& n : root["models"]) {
        std::optional<Model> m = read_model(n);
        if (m) spec.models.push_back(std::move(*m));
      }
    }
    if (root["paths"]) {
      for (const auto& n : root["paths"]) spec.paths.push_back(read_path(n));
    }
    if (root["builds"]) {
      for (const auto& n : root["builds"]) {
        std::optional<Build> b = read_build(n);
        if (b) spec.builds.push_back(std::move(*b));
      }
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
      if (!subscript::is_name(a.name)) {
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

  // `~` in the outputs only always covers no dims (cl-waffe2 binds it to an
  // empty list): in a node or model it can only be a mistake.
  template <typename Text>
  bool check_batch_has_input(const subscript::Declaration& d, const Text& text, const std::string& owner) {
    const subscript::Subscript* s = subscript::batch_only_in_outputs(d);
    if (!s) return true;
    std::string arg;
    for (const auto& a : d.outputs)
      if (s >= a.dims.data() && s < a.dims.data() + a.dims.size()) arg = a.str();
    error_at(text.at(s->offset), "in the where of " + owner + ": '~' appears in the output " + arg +
                                     " but in no input, so it always covers no dims (as in cl-waffe2); remove it or add '~' to an input",
             1);
    return false;
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
    if (!check_batch_has_input(node.where, node.where_text, owner)) return std::nullopt;
    if (n["save_for_backward"]) {
      for (const auto& f : n["save_for_backward"]) node.save_for_backward.push_back(f.as<bool>());
      if (node.save_for_backward.size() != node.where.inputs.size()) {
        error(n["save_for_backward"], "save_for_backward of " + owner + " has " +
                                          std::to_string(node.save_for_backward.size()) + " flags, but the node has " +
                                          std::to_string(node.where.inputs.size()) + " inputs (" +
                                          [&] {
                                            std::string in = node.where_text.value.substr(0, node.where_text.value.find("->"));
                                            while (!in.empty() && in.back() == ' ') in.pop_back();
                                            return in;
                                          }() + ")");
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
        Text gradient = text_of(src_, kv.second);
        try {
          (void)body::parse_expression(gradient.value);
        } catch (const body::ParseError& e) {
          error_at(gradient.at(e.offset()), "in the backward of " + input + " of " + owner + ": " + e.what(),
                   static_cast<int>(e.length()));
          continue;
        }
        node.backward.emplace_back(input, std::move(gradient));
      }
    }
    if (n["out_scalar"]) node.out_scalar = n["out_scalar"].as<bool>();
    if (n["extends"]) {
      for (const auto& e : n["extends"]) {
        node.extends.push_back(e.Scalar());
        node.extends_locs.push_back(detail::loc_of(src_, e.Mark()));
      }
    }
    if (const auto& od = n["out_dtype"]) {
      node.out_dtype = rt::DType::f32;  // the schema allows the five dtypes
      for (int k = 0; k < rt::kDTypeCount; ++k)
        if (od.Scalar() == rt::dtype_name(static_cast<rt::DType>(k))) node.out_dtype = static_cast<rt::DType>(k);
      node.out_dtype_loc = detail::loc_of(src_, od.Mark());
    }
    for (const auto& x : n["indices"]) {
      const bool input = std::any_of(node.where.inputs.begin(), node.where.inputs.end(),
                                     [&](const subscript::Argument& a) { return a.name && *a.name == x.Scalar(); });
      if (!input) {
        std::vector<std::string> inputs;
        for (const auto& a : node.where.inputs)
          if (a.name) inputs.push_back(*a.name);
        error(x, "'" + quote(x.Scalar()) + "' in the indices of " + owner + " is not an input of the node" +
                     did_you_mean(x.Scalar(), inputs) + " (inputs: " + join(inputs) + ")");
        continue;
      }
      node.indices.push_back(x.Scalar());
      node.indices_locs.push_back(detail::loc_of(src_, x.Mark()));
    }
    // Every output symbol must be determined: by an input, a where binding
    // or a constructor argument (cl-waffe2 reports the rest at run time;
    // wfgen knows the arguments, so it reports them here).
    for (const auto& out : node.where.outputs) {
      for (const auto& sub : out.dims) {
        if (sub.kind != subscript::Subscript::Kind::Symbol) continue;
        bool bound = false;
        for (const auto& in : node.where.inputs)
          for (const auto& d : in.dims) bound = bound || (d.kind == subscript::Subscript::Kind::Symbol && d.name == sub.name);
        for (const auto& b : node.where.where) bound = bound || b.symbol == sub.name;
        for (const auto& a : node.args) bound = bound || a.name == sub.name;
        if (!bound) {
          error_at(node.where_text.at(sub.offset),
                   "in the where of " + owner + ": the output symbol '" + sub.name +
                       "' is never determined; use it in an input, bind it with 'where " + sub.name +
                       " = ...', or make it a constructor argument",
                   static_cast<int>(sub.name.size()));
        }
      }
    }
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

  std::optional<Model> read_model(const YAML::Node& n) {
    Model m;
    m.name = n["name"].Scalar();
    m.loc = detail::loc_of(src_, n["name"].Mark());
    std::size_t errors_before = errors_.size();
    std::string owner = "model '" + m.name + "'";
    check_cpp_name(n["name"], m.name);
    m.args = read_args(n["args"], owner, "argument");
    if (const auto& ps = n["params"]) {
      for (const auto& kv : ps) {
        Param p;
        p.name = kv.first.Scalar();
        p.loc = detail::loc_of(src_, kv.first.Mark());
        if (!subscript::is_name(p.name) || p.name.find('-') != std::string::npos) {
          error(kv.first, "invalid parameter name '" + quote(p.name) + "' of " + owner +
                              ": expected letters, digits and '_', starting with a letter or '_'");
          continue;
        }
        check_cpp_name(kv.first, p.name);
        for (const auto& d : kv.second["shape"]) p.shape.push_back(text_of(src_, d));
        if (const auto& init = kv.second["init"]) {
          if (init.IsScalar()) {
            std::string k = init.Scalar();
            p.init.kind = k == "ones" ? Init::Kind::Ones : k == "xavier" ? Init::Kind::Xavier : k == "he" ? Init::Kind::He : Init::Kind::Zeros;
          } else if (init["constant"]) {
            p.init = {Init::Kind::Constant, init["constant"].as<double>(), 0};
          } else if (init["uniform"]) {
            p.init = {Init::Kind::Uniform, init["uniform"][0].as<double>(), init["uniform"][1].as<double>()};
            if (!(p.init.a < p.init.b)) error(init, "uniform init of '" + p.name + "' needs low < high");
          } else {
            p.init = {Init::Kind::Normal, init["normal"][0].as<double>(), init["normal"][1].as<double>()};
            if (!(p.init.b >= 0)) error(init, "normal init of '" + p.name + "' needs a standard deviation >= 0");
          }
        }
        if (kv.second["requires_grad"]) p.requires_grad = kv.second["requires_grad"].as<bool>();
        m.params.push_back(std::move(p));
      }
    }
    if (n["where"]) {
      m.where_text = text_of(src_, n["where"]);
      try {
        m.where = subscript::parse(m.where_text->value);
      } catch (const subscript::ParseError& e) {
        error_at(m.where_text->at(e.offset()), std::string("in the where of ") + owner + ": " + e.what(),
                 static_cast<int>(e.length()));
        return std::nullopt;
      }
      if (!check_batch_has_input(*m.where, *m.where_text, owner)) return std::nullopt;
      for (std::size_t i = 0; i < m.where->inputs.size(); ++i) {
        const auto& a = m.where->inputs[i];
        if (!a.name) {
          error_at(m.where_text->at(a.offset), "in the where of " + owner + ": every input of a model needs a name, as in X[batch in]", 1);
          return std::nullopt;
        }
        m.inputs.push_back(*a.name);
      }
      if (n["inputs"]) error(n["inputs"], owner + " has both 'where' and 'inputs'; the inputs are the where line's, remove 'inputs'");
    } else if (n["inputs"]) {
      for (const auto& i : n["inputs"]) m.inputs.push_back(i.Scalar());
    }
    m.call = text_of(src_, n["call"]);
    if (n["doc"]) m.doc = n["doc"].Scalar();
    if (errors_.size() != errors_before) return std::nullopt;
    return m;
  }

  // The schema has checked the keys and types; the combination is checked here.
  Path read_path(const YAML::Node& n) {
    Path p;
    p.name = n["name"].Scalar();
    p.loc = detail::loc_of(src_, n["name"].Mark());
    if (n["device"]) p.device = n["device"].Scalar();
    if (n["doc"]) p.doc = n["doc"].Scalar();
    const int forms = (n["pattern"] || n["replace"] ? 1 : 0) + (n["bypass"] ? 1 : 0) + (n["fuse"] || n["into"] ? 1 : 0);
    if (forms != 1) {
      error(n, "path '" + p.name + "' must be one of: a symbolic path (pattern and replace), a bypass (bypass: {node, with}) " +
                   "or a fusion path (fuse: [queries] and into)" + (forms ? std::string(", not several") : std::string()));
      return p;
    }
    if (n["pattern"] || n["replace"]) {
      p.kind = Path::Kind::Symbolic;
      if (!n["pattern"] || !n["replace"]) {
        error(n, "symbolic path '" + p.name + "' needs both 'pattern' and 'replace'");
        return p;
      }
      p.pattern = text_of(src_, n["pattern"]);
      p.replace = text_of(src_, n["replace"]);
    } else if (n["bypass"]) {
      p.kind = Path::Kind::Bypass;
      p.node = n["bypass"]["node"].Scalar();
      p.with = n["bypass"]["with"].Scalar();
      p.with_loc = detail::loc_of(src_, n["bypass"]["with"].Mark());
    } else {
      p.kind = Path::Kind::Fusion;
      if (!n["fuse"] || !n["into"]) {
        error(n, "fusion path '" + p.name + "' needs both 'fuse' (the queries) and 'into' (the node replacing them)");
        return p;
      }
      for (const auto& q : n["fuse"]) {
        PathQuery query;
        query.node = q["node"].Scalar();
        query.loc = detail::loc_of(src_, q["node"].Mark());
        if (q["device"]) query.device = q["device"].Scalar();
        for (const auto& d : q["dtypes"])
          for (int k = 0; k < rt::kDTypeCount; ++k)
            if (d.Scalar() == rt::dtype_name(static_cast<rt::DType>(k))) query.dtypes.push_back(static_cast<rt::DType>(k));
        if (q["when"]) query.when = text_of(src_, q["when"]);
        p.fuse.push_back(std::move(query));
      }
      p.into = n["into"].Scalar();
      p.into_loc = detail::loc_of(src_, n["into"].Mark());
    }
    return p;
  }

  std::optional<Build> read_build(const YAML::Node& n) {
    Build b;
    b.name = n["name"].Scalar();
    b.loc = detail::loc_of(src_, n["name"].Mark());
    b.model = n["model"].Scalar();
    b.model_loc = detail::loc_of(src_, n["model"].Mark());
    std::size_t errors_before = errors_.size();
    check_cpp_name(n["name"], b.name);
    if (const auto& args = n["args"]) {
      for (const auto& kv : args) {
        std::string name = kv.first.Scalar();
        std::optional<ArgValue> v;
        const YAML::Node& x = kv.second;
        std::int64_t i;
        double f;
        bool flag;
        if (x.IsSequence()) {
          std::vector<std::int64_t> ints;
          std::vector<double> floats;
          bool all_int = true;
          for (const auto& item : x) {
            if (item.IsScalar() && YAML::convert<std::int64_t>::decode(item, i)) {
              ints.push_back(i);
              floats.push_back(static_cast<double>(i));
            } else if (item.IsScalar() && YAML::convert<double>::decode(item, f)) {
              all_int = false;
              floats.push_back(f);
            } else {
              error(item, "expected a number in the list '" + quote(name) + "' of build '" + quote(b.name) + "', but got " + yaml_kind(item));
            }
          }
          v = all_int ? ArgValue(ints) : ArgValue(floats);
        } else if (x.IsScalar() && YAML::convert<std::int64_t>::decode(x, i)) {
          v = i;
        } else if (x.IsScalar() && YAML::convert<double>::decode(x, f)) {
          v = f;
        } else if (x.IsScalar() && YAML::convert<bool>::decode(x, flag)) {
          v = flag;
        } else {
          error(x, "expected a number, true/false or a list for the argument '" + quote(name) + "' of build '" + quote(b.name) +
                       "', but got " + yaml_kind(x));
          continue;
        }
        b.args.emplace_back(name, *v);
        b.arg_locs[name] = detail::loc_of(src_, kv.first.Mark());
      }
    }
    if (n["dtype"]) {
      std::string t = n["dtype"].Scalar();
      for (int k = 0; k < rt::kDTypeCount; ++k)
        if (t == rt::dtype_name(static_cast<rt::DType>(k))) b.dtype = static_cast<rt::DType>(k);
    }
    if (n["devices"]) {
      b.devices.clear();
      for (const auto& d : n["devices"]) b.devices.push_back(d.Scalar());
    }
    if (n["as"]) b.as_node = n["as"].Scalar() == "node";
    if (n["seed"]) {
      // The schema says integer >= 0; an integer past 2^64 - 1 still needs a message.
      if (!YAML::convert<std::uint64_t>::decode(n["seed"], b.seed) || n["seed"].Scalar().find('-') != std::string::npos) {
        error(n["seed"], "the seed of build '" + b.name + "' must be an integer from 0 to 18446744073709551615, but got '" +
                             quote(n["seed"].Scalar()) + "'");
      }
    }
    if (n["backward"]) b.backward = n["backward"].as<bool>();
    if (n["fuse"]) b.fuse = n["fuse"].as<bool>();
    for (const auto& kv : n["input_dtypes"]) {
      rt::DType dt = rt::DType::i64;  // the schema allows i32, i64 and u8
      for (int k = 0; k < rt::kDTypeCount; ++k)
        if (kv.second.Scalar() == rt::dtype_name(static_cast<rt::DType>(k))) dt = static_cast<rt::DType>(k);
      b.input_dtypes.emplace_back(kv.first.Scalar(), dt);
      b.input_dtype_locs[kv.first.Scalar()] = detail::loc_of(src_, kv.first.Mark());
    }
    for (const auto& kv : n["typed_inputs"]) {
      rt::DType dt = rt::DType::i64;  // the schema allows the five dtypes
      for (int k = 0; k < rt::kDTypeCount; ++k)
        if (kv.second.Scalar() == rt::dtype_name(static_cast<rt::DType>(k))) dt = static_cast<rt::DType>(k);
      b.typed_inputs.emplace_back(kv.first.Scalar(), dt);
      b.typed_input_locs[kv.first.Scalar()] = detail::loc_of(src_, kv.first.Mark());
    }
    if (const auto& m = n["math"]) {
      b.math_loc = detail::loc_of(src_, m.Mark());
      const std::string mode = m.Scalar();
      if (mode == "fast") {
        b.fast_math = true;
      } else if (mode != "accurate") {
        error(m, "the math of build '" + b.name + "' must be 'accurate' (exp within 1 ulp, the default) or 'fast' (exp within 6 ulp in the kernels fusion makes), but got '" + quote(mode) + "'");
      }
      if (b.fast_math && n["fuse"] && !b.fuse) {
        error(m, "build '" + b.name + "' has 'math: fast' and 'fuse: false': the fast exp goes into the kernels fusion makes, and this build makes none");
      }
    }
    for (const auto& x : n["grad_inputs"]) {
      b.grad_inputs.push_back(x.Scalar());
      b.grad_input_locs.push_back(detail::loc_of(src_, x.Mark()));
    }
    if (const auto& o = n["optimizer"]) {
      for (const auto& kv : o) {
        Optimizer opt;
        opt.node = kv.first.Scalar();
        opt.loc = detail::loc_of(src_, kv.first.Mark());
        for (const auto& h : kv.second) {
          bool flag;
          if (YAML::convert<bool>::decode(h.second, flag) && h.second.Tag() != "!") {
            opt.values.emplace_back(h.first.Scalar(), ArgValue(flag));
          } else {
            opt.values.emplace_back(h.first.Scalar(), ArgValue(h.second.as<double>()));
          }
          opt.locs[h.first.Scalar()] = detail::loc_of(src_, h.first.Mark());
        }
        b.optimizer = std::move(opt);
      }
    }
    if (n["doc"]) b.doc = n["doc"].Scalar();
    if (errors_.size() != errors_before) return std::nullopt;
    return b;
  }

  std::optional<Impl> read_impl(const YAML::Node& n, const YAML::Node& node_name) {
    Impl impl;
    impl.node = node_name.Scalar();
    impl.device = n["device"].Scalar();
    impl.loc = detail::loc_of(src_, node_name.Mark());
    std::size_t errors_before = errors_.size();
    std::string owner = "the " + impl.device + " implementation of '" + impl.node + "'";
    for (const auto& d : n["dtypes"]) {
      std::string t = d.Scalar();
      rt::DType dt = rt::DType::f32;
      for (int k = 0; k < rt::kDTypeCount; ++k)
        if (t == rt::dtype_name(static_cast<rt::DType>(k))) dt = static_cast<rt::DType>(k);
      if (std::find(impl.dtypes.begin(), impl.dtypes.end(), dt) != impl.dtypes.end()) {
        error(d, "dtype " + t + " is listed twice in " + owner);
      }
      impl.dtypes.push_back(dt);
    }
    auto read_ranks = [&](const YAML::Node& r, std::vector<int>& ranks) {
      if (r.IsSequence()) {
        for (const auto& x : r) ranks.push_back(x.as<int>());
      } else {
        std::string range = r.Scalar();
        int lo = range[0] - '0', hi = range[3] - '0';
        if (lo > hi) error(r, "empty rank range '" + range + "' in " + owner + ": expected low..high");
        for (int k = lo; k <= hi; ++k) ranks.push_back(k);
      }
      std::sort(ranks.begin(), ranks.end());
      ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    };
    if (const auto& r = n["ranks"]) read_ranks(r, impl.ranks);
    if (const auto& r = n["demand_ranks"]) read_ranks(r, impl.demand_ranks);
    if (n["reject"]) impl.reject = text_of(src_, n["reject"]);
    if (n["node"] && n["backward"]) {
      for (const auto& kv : n["backward"]) impl.backward.emplace_back(kv.first.Scalar(), text_of(src_, kv.second));
    }
    if (n["doc"] && n["node"]) impl.doc = n["doc"].Scalar();
    if (n["parallel"] && n["parallel"]["grain"]) impl.parallel_grain = n["parallel"]["grain"].as<std::int64_t>();
    if (n["fuse_epilogue"]) impl.fuse_epilogue = n["fuse_epilogue"].as<bool>();
    if (n["fuse_attention"]) impl.fuse_attention = n["fuse_attention"].as<bool>();
    // Exactly one kernel body.
    const char* kinds[] = {"elementwise", "reduce", "gemm", "cpp", "builtin", "view"};
    std::vector<std::string> present;
    for (const char* k : kinds)
      if (n[k]) present.push_back(k);
    if (present.size() != 1) {
      std::string msg = present.empty() ? owner + " has no kernel body; expected one of: elementwise, reduce, gemm, cpp, builtin, view"
                                        : owner + " has " + std::to_string(present.size()) + " kernel bodies (" + join(present) +
                                              "); expected exactly one";
      error(present.empty() ? node_name : n[present[1]], msg);
      return std::nullopt;
    }
    const std::string& kind = present.front();
    if (kind == "elementwise") {
      impl.kind = BodyKind::Elementwise;
      impl.elementwise = text_of(src_, n["elementwise"]);
    } else if (kind == "reduce") {
      impl.kind = BodyKind::Reduce;
      const auto& r = n["reduce"];
      std::string op = r["op"].Scalar();
      const std::pair<const char*, ReduceOp> ops[] = {{"sum", ReduceOp::Sum}, {"mean", ReduceOp::Mean}, {"max", ReduceOp::Max},
                                                      {"min", ReduceOp::Min}, {"argmax", ReduceOp::ArgMax}, {"argmin", ReduceOp::ArgMin}};
      for (const auto& [name, value] : ops)
        if (op == name) impl.reduce_op = value;
      if (r["prologue"]) impl.prologue = text_of(src_, r["prologue"]);
      if (r["epilogue"]) impl.epilogue = text_of(src_, r["epilogue"]);
    } else if (kind == "gemm") {
      impl.kind = BodyKind::Gemm;
      if (!n["gemm"].as<bool>()) {
        error(n["gemm"], "'gemm: false' in " + owner + " gives no kernel body; remove it or set it to true");
      }
    } else if (kind == "cpp") {
      impl.kind = BodyKind::Cpp;
      const auto& c = n["cpp"];
      std::filesystem::path file = c["file"].Scalar();
      impl.cpp_function = text_of(src_, c["function"]);
      const std::string& written = c["file"].Scalar();
      auto bad_char = std::find_if(written.begin(), written.end(), [](char ch) {
        auto u = static_cast<unsigned char>(ch);
        return u < 0x20 || u >= 0x7f || ch == '"' || ch == '\\';
      });
      if (written.empty() || bad_char != written.end()) {
        error(c["file"], "the C++ file '" + quote(written) + "' of " + owner +
                             " is not a plain relative path; expected printable ASCII without quotes and backslashes, "
                             "separated by '/'");
      } else if (file.is_absolute()) {
        error(c["file"], "the C++ file of " + owner + " must be a path relative to the spec file, but got '" +
                             quote(file.string()) + "'");
      } else {
        std::filesystem::path base = std::filesystem::path(src_.name).parent_path();
        std::filesystem::path normal = file.lexically_normal();
        impl.cpp_file = (base / normal).lexically_normal();
        impl.cpp_file_as_written = normal.generic_string();
        if (!normal.empty() && *normal.begin() == "..") {
          error(c["file"], "the C++ file '" + quote(file.string()) + "' of " + owner +
                               " is outside the spec's folder; kernel files must be inside the project");
        } else if (auto real = resolved_outside(base, impl.cpp_file)) {
          error(c["file"], "the C++ file '" + quote(file.string()) + "' of " + owner + " is a link to '" +
                               quote(real->string()) + "', outside the spec's folder; kernel files must be inside the project");
        }
      }
    } else if (kind == "builtin") {
      impl.kind = BodyKind::Builtin;
      impl.builtin = n["builtin"].Scalar();
    } else {
      impl.kind = BodyKind::View;
      impl.view = n["view"].Scalar();
    }
    if (impl.kind == BodyKind::Gemm && impl.device != "blas" && impl.device != "cpu") {
      // Other devices provide GEMM through a cpp body.
      error(n["device"], "gemm kernels exist for the devices cpu and blas, but " + owner + " is for '" + impl.device + "'");
    }
    if (errors_.size() != errors_before) return std::nullopt;
    return impl;
  }

  const Source& src_;
  std::vector<Diagnostic>& errors_;
};

}  // namespace

void read_document(const Source& src, const YAML::Node& root, Spec& spec, std::vector<Diagnostic>& errors) {
  Reader(src, errors).read(root, spec);
}

}  // namespace wfgen::spec::detail
