#include "wfgen/spec/schema_check.hpp"

#include <stdexcept>

#include <valijson/adapters/yaml_cpp_adapter.hpp>

// valijson 1.0's yaml-cpp adapter has no operator-- on its array iterator,
// which only the `uniqueItems` constraint needs. Our schemas do not use
// uniqueItems; this definition lets the validator compile and fails loudly
// if a schema ever does.
namespace valijson::adapters {
inline YamlCppArrayValueIterator operator--(YamlCppArrayValueIterator&&) {
  throw std::logic_error("uniqueItems is not supported for YAML documents in wfgen's schemas");
}
}  // namespace valijson::adapters

#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include <set>

#include "wfgen/support/embedded.hpp"

namespace wfgen::schemas {
std::span<const wfgen::EmbeddedFile> files();
}

namespace wfgen::spec {

std::string_view schema_text() {
  for (const auto& f : schemas::files())
    if (f.path == "spec.schema.json") return f.text;
  WFGEN_ASSERT(false, "spec.schema.json is not embedded");
}

namespace detail {

namespace {

// ---------------------------------------------------------------------------
// Schema validation

// The embedded schema, parsed once (JSON is YAML, so yaml-cpp reads it).
struct Schema {
  YAML::Node root;
  valijson::Schema compiled;

  Schema() : root(YAML::Load(std::string(schema_text()))) {
    valijson::SchemaParser parser;
    valijson::adapters::YamlCppAdapter adapter(root);
    parser.populateSchema(adapter, compiled);
  }
};

const Schema& schema() {
  static const Schema s;
  return s;
}

YAML::Node resolve_ref(YAML::Node n) {
  for (int guard = 0; guard < 16 && n && n.IsMap() && n["$ref"]; ++guard) {
    std::string ref = n["$ref"].as<std::string>();
    const std::string prefix = "#/definitions/";
    if (ref.rfind(prefix, 0) != 0) break;
    n = schema().root["definitions"][ref.substr(prefix.size())];
  }
  return n;
}

// Context elements from valijson: "<root>", "[key]", "[index]".
std::vector<std::string> path_of(const std::vector<std::string>& context) {
  std::vector<std::string> out;
  for (const auto& c : context) {
    if (c.size() >= 2 && c.front() == '[' && c.back() == ']') out.push_back(c.substr(1, c.size() - 2));
  }
  return out;
}

bool is_index(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

// The schema node that describes the value at `path`.
YAML::Node schema_at(const std::vector<std::string>& path) {
  YAML::Node n = resolve_ref(schema().root);
  for (const auto& p : path) {
    if (!n || !n.IsMap()) return YAML::Node();
    if (is_index(p) && n["items"]) {
      n = resolve_ref(n["items"]);
    } else if (n["properties"] && n["properties"][p]) {
      n = resolve_ref(n["properties"][p]);
    } else if (n["additionalProperties"] && n["additionalProperties"].IsMap()) {
      n = resolve_ref(n["additionalProperties"]);
    } else {
      return YAML::Node();
    }
  }
  return n;
}

// The document node at `path`, and the key node naming it (for maps).
struct Located {
  YAML::Node value;
  YAML::Node key;
};

Located doc_at(const YAML::Node& root, const std::vector<std::string>& path) {
  Located at{root, YAML::Node()};
  for (const auto& p : path) {
    if (at.value.IsSequence() && is_index(p)) {
      std::size_t i = std::stoul(p);
      if (i >= at.value.size()) return at;
      at = {at.value[i], YAML::Node()};
    } else if (at.value.IsMap()) {
      bool found = false;
      for (const auto& kv : at.value) {
        if (kv.first.IsScalar() && kv.first.Scalar() == p) {
          at = {kv.second, kv.first};
          found = true;
          break;
        }
      }
      if (!found) return at;
    } else {
      return at;
    }
  }
  return at;
}

// "node 'MatMul'", "nodes[3]", "the file".
std::string describe_path(const YAML::Node& root, const std::vector<std::string>& path) {
  if (path.empty()) return "the spec file";
  std::string out;
  YAML::Node n = root;
  std::string last_list;
  for (const auto& p : path) {
    if (is_index(p) && n.IsSequence()) {
      n = n[std::stoul(p)];
      std::string singular = last_list.size() > 1 && last_list.back() == 's' ? last_list.substr(0, last_list.size() - 1) : last_list;
      if (n.IsMap() && n["name"] && n["name"].IsScalar()) out = singular + " '" + quote(n["name"].Scalar()) + "'";
      else out = last_list + "[" + p + "]";
    } else if (n.IsMap()) {
      n = n[p];
      last_list = p;
      if (!(n && n.IsSequence())) out += (out.empty() ? "'" : ", key '") + p + "'";
    }
    if (!n) break;
  }
  return out.empty() ? "the spec file" : out;
}

}  // namespace

std::string yaml_kind(const YAML::Node& n) {

  if (!n || n.IsNull()) return "nothing (null)";
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  return "'" + quote(n.Scalar()) + "'";
}

namespace {

std::string type_phrase(const YAML::Node& s) {
  if (!s || !s["type"]) return "a value of another type";
  std::string t = s["type"].as<std::string>();
  if (t == "object") return "a mapping";
  if (t == "array") return "a list";
  if (t == "string") return "a string";
  if (t == "boolean") return "true or false";
  if (t == "integer") return "an integer";
  if (t == "number") return "a number";
  return t;
}

std::vector<std::string> schema_keys(const YAML::Node& s) {
  std::vector<std::string> out;
  if (s && s["properties"])
    for (const auto& kv : s["properties"]) out.push_back(kv.first.as<std::string>());
  return out;
}

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string between_quotes(const std::string& s) {
  auto a = s.find('\'');
  auto b = s.rfind('\'');
  if (a == std::string::npos || b <= a) return {};
  return s.substr(a + 1, b - a - 1);
}

Diagnostic schema_error(const Source& src, const YAML::Node& root, const valijson::ValidationResults::Error& e) {
  std::vector<std::string> path = path_of(e.context);
  Located at = doc_at(root, path);
  YAML::Node s = schema_at(path);
  std::string where = describe_path(root, path);
  const std::string& d = e.description;
  if (d.find("could not be validated using 'properties'") != std::string::npos) {
    std::string key = between_quotes(d);
    Located k = doc_at(root, [&] { auto p = path; p.push_back(key); return p; }());
    std::vector<std::string> keys = schema_keys(s);
    std::string msg = "unknown key '" + quote(key) + "' in " + where + did_you_mean(key, keys);
    if (!keys.empty()) msg += " (expected one of: " + join(keys) + ")";
    return diag_at(src, k.key ? k.key : at.value, msg);
  }
  if (d.find("missing required property") != std::string::npos || d.find("Missing required property") != std::string::npos) {
    std::string key = between_quotes(d);
    std::string msg = "missing required key '" + key + "' in " + where;
    if (s && s["properties"] && s["properties"][key] && s["properties"][key]["description"]) {
      msg += " (" + s["properties"][key]["description"].as<std::string>() + ")";
    }
    return diag_at(src, at.value, msg);
  }
  if (d.find("'type' constraint") != std::string::npos) {
    return diag_at(src, at.value, "expected " + type_phrase(s) + " for " + where + ", but got " + yaml_kind(at.value));
  }
  if (d.find("enum") != std::string::npos && s && s["enum"]) {
    std::vector<std::string> options;
    for (const auto& o : s["enum"]) options.push_back(o.as<std::string>());
    std::string got = at.value.IsScalar() ? at.value.Scalar() : "";
    return diag_at(src, at.value, "unknown value " + yaml_kind(at.value) + " for " + where + did_you_mean(got, options) +
                                      " (expected one of: " + join(options) + ")");
  }
  if (d.find("'pattern'") != std::string::npos) {
    std::string why = s && s["description"] ? s["description"].as<std::string>() : "it does not match the required pattern";
    return diag_at(src, at.value, "invalid " + where + " " + yaml_kind(at.value) + ": " + why);
  }
  if (d.find("minLength") != std::string::npos || d.find("shorter than") != std::string::npos) {
    return diag_at(src, at.value, where + " must not be empty");
  }
  return diag_at(src, at.value, "invalid " + where + ": " + d);
}

}  // namespace

void validate(const Source& src, const YAML::Node& root, std::vector<Diagnostic>& errors) {
  valijson::Validator validator(valijson::Validator::kWeakTypes);
  valijson::ValidationResults results;
  valijson::adapters::YamlCppAdapter adapter(root);
  if (validator.validate(schema().compiled, adapter, &results)) return;
  // valijson reports a chain per failure, from the leaf up to its parents
  // ("Failed to validate item #0 in array"); keep only the leaves.
  valijson::ValidationResults::Error e;
  std::set<std::string> seen;
  std::vector<Diagnostic> found;
  while (results.popError(e)) {
    if (e.description.rfind("Failed to validate", 0) == 0) continue;
    if (e.description.find("Failed to match") != std::string::npos && e.description.find("enum") == std::string::npos &&
        e.description.find("pattern") == std::string::npos)
      continue;
    Diagnostic diag = schema_error(src, root, e);
    std::string key = diag.loc.str() + diag.message;
    if (seen.insert(key).second) found.push_back(std::move(diag));
  }
  if (found.empty()) found.push_back(diag_at(src, root, "the file does not match the spec schema"));
  errors.insert(errors.end(), found.begin(), found.end());
}


}  // namespace detail
}  // namespace wfgen::spec
