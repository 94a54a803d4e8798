#include "wfgen/spec/schema_check.hpp"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
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

// The embedded schema as YAML (JSON is YAML), for walking it next to the
// user's document in error messages; valijson's copy is in
// schema_valijson.cpp.
struct Schema {
  YAML::Node root;

  Schema() : root(YAML::Load(std::string(schema_text()))) {}
};

const Schema& schema() {
  static const Schema s;
  return s;
}

// yaml-cpp's Node::operator= writes through to the node it refers to: `n =
// n["items"]` would overwrite part of the (shared, static) schema or of the
// user's document. Walking a tree must rebind the handle instead; lookups
// go through const nodes, which never insert keys.
void rebind(YAML::Node& n, const YAML::Node& to) {
  std::destroy_at(&n);
  std::construct_at(&n, to);
}

YAML::Node child(const YAML::Node& n, const std::string& key) {
  if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& c = n;
  for (const auto& kv : c)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  return YAML::Node(YAML::NodeType::Undefined);
}

YAML::Node resolve_ref(const YAML::Node& start) {
  YAML::Node n = start;
  for (int guard = 0; guard < 16 && child(n, "$ref"); ++guard) {
    std::string ref = child(n, "$ref").as<std::string>();
    const std::string prefix = "#/definitions/";
    if (ref.rfind(prefix, 0) != 0) break;
    rebind(n, child(child(schema().root, "definitions"), ref.substr(prefix.size())));
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
    if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node props = child(n, "properties"), extra = child(n, "additionalProperties");
    if (is_index(p) && child(n, "items")) {
      rebind(n, resolve_ref(child(n, "items")));
    } else if (child(props, p)) {
      rebind(n, resolve_ref(child(props, p)));
    } else if (extra && extra.IsMap()) {
      rebind(n, resolve_ref(extra));
    } else {
      return YAML::Node(YAML::NodeType::Undefined);
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
  YAML::Node value = root, key(YAML::NodeType::Undefined);
  for (const auto& p : path) {
    if (value.IsSequence() && is_index(p)) {
      std::size_t i = std::stoul(p);
      if (i >= value.size()) break;
      const YAML::Node& seq = value;
      rebind(value, seq[i]);
      rebind(key, YAML::Node(YAML::NodeType::Undefined));
    } else if (value.IsMap()) {
      bool found = false;
      const YAML::Node& map = value;
      for (const auto& kv : map) {
        if (kv.first.IsScalar() && kv.first.Scalar() == p) {
          YAML::Node k = kv.first, v = kv.second;
          rebind(value, v);
          rebind(key, k);
          found = true;
          break;
        }
      }
      if (!found) break;
    } else {
      break;
    }
  }
  return Located{value, key};
}

// How an entry of a top-level list is named: "node 'MatMul'", "the cpu
// implementation of 'Add'", "nodes[3]". The field `skip` is not used (it is
// the one found invalid).
std::string describe_entry(const YAML::Node& item, const std::string& list, const std::string& index,
                           const std::string& skip) {
  auto field = [&](const char* k) {
    YAML::Node v = child(item, k);
    return skip != k && v && v.IsScalar() ? std::optional<std::string>(v.Scalar()) : std::nullopt;
  };
  auto name = field("name"), node = field("node"), device = field("device");
  if (list == "impls" && node) {
    if (device) return "the " + quote(*device) + " implementation of '" + quote(*node) + "'";
    return "the implementation of '" + quote(*node) + "'";
  }
  std::string singular = list.size() > 1 && list.back() == 's' ? list.substr(0, list.size() - 1) : list;
  if (name) return singular + " '" + quote(*name) + "'";
  return list + "[" + index + "]";
}

// A path as (the value inside an entry, the entry): ("args.n.type", "node
// 'MatMul'"), ("", "nodes[3]"), ("nodes", "the spec file").
std::pair<std::string, std::string> split_path(const YAML::Node& root, const std::vector<std::string>& path) {
  if (path.empty()) return {"", "the spec file"};
  if (path.size() == 1) return {quote(path[0]), "the spec file"};
  Located list = doc_at(root, {path[0]});
  std::string skip = path.size() == 3 ? path[2] : "";
  std::string entry = path[0] + "[" + path[1] + "]";
  if (list.value.IsSequence() && is_index(path[1]) && std::stoul(path[1]) < list.value.size()) {
    const YAML::Node& seq = list.value;
    entry = describe_entry(seq[std::stoul(path[1])], path[0], path[1], skip);
  }
  std::string inner;
  for (std::size_t i = 2; i < path.size(); ++i) {
    if (is_index(path[i])) inner += "[" + path[i] + "]";
    else inner += (inner.empty() ? "" : ".") + quote(path[i]);
  }
  return {inner, entry};
}

// Where a value is: "node 'MatMul'" (an entry), "'args.n.type' in node
// 'MatMul'" (a value inside an entry), "'nodes'".
std::string describe_path(const YAML::Node& root, const std::vector<std::string>& path) {
  auto [inner, entry] = split_path(root, path);
  if (path.size() == 1) return "'" + inner + "'";
  return inner.empty() ? entry : "'" + inner + "' in " + entry;
}

// "invalid name 'my-op' in nodes[0]", "invalid ranks '1..9' in the cpu
// implementation of 'Add'".
std::string invalid_value(const YAML::Node& root, const std::vector<std::string>& path, const YAML::Node& value) {
  auto [inner, entry] = split_path(root, path);
  std::string got = value.IsScalar() ? " " + yaml_kind(value) : " (" + yaml_kind(value) + ")";
  if (inner.empty()) return "invalid " + entry + got;
  return "invalid " + inner + got + " in " + entry;
}

}  // namespace

std::string yaml_kind(const YAML::Node& n) {

  if (!n || n.IsNull()) return "nothing (null)";
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  return "'" + quote(n.Scalar()) + "'";
}

namespace {

// The types a schema allows ("type": "string" or ["integer", "string"]).
std::vector<std::string> types_of(const YAML::Node& s) {
  std::vector<std::string> out;
  YAML::Node t = child(s, "type");
  if (t && t.IsScalar()) out.push_back(t.Scalar());
  if (t && t.IsSequence())
    for (const auto& x : t)
      if (x.IsScalar()) out.push_back(x.Scalar());
  return out;
}

std::string type_phrase(const YAML::Node& s) {
  std::vector<std::string> types = types_of(s);
  if (types.empty()) return "a value of another type";
  std::string out;
  for (std::size_t i = 0; i < types.size(); ++i) {
    const std::string& t = types[i];
    std::string p = t == "object" ? "a mapping" : t == "array" ? "a list" : t == "string" ? "a string"
                  : t == "boolean" ? "true or false" : t == "integer" ? "an integer" : t == "number" ? "a number" : t;
    out += (i == 0 ? "" : i + 1 == types.size() ? " or " : ", ") + p;
  }
  return out;
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

// The text between the last pair of quotes: valijson names the culprit last.
std::string last_quoted(const std::string& s) {
  auto b = s.rfind('\'');
  if (b == std::string::npos || b == 0) return {};
  auto a = s.rfind('\'', b - 1);
  if (a == std::string::npos) return {};
  return s.substr(a + 1, b - a - 1);
}

// A schema description as a message fragment: lowercase start, no period.
std::string fragment(std::string d) {
  while (!d.empty() && (d.back() == '.' || d.back() == ' ')) d.pop_back();
  if (d.size() > 1 && std::isupper(static_cast<unsigned char>(d[0])) && !std::isupper(static_cast<unsigned char>(d[1])))
    d[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(d[0])));
  return d;
}

// The description of the value at `path`, from the property that names it
// (before its $ref is followed) or from the definition.
std::string description_at(const std::vector<std::string>& path) {
  if (!path.empty()) {
    std::vector<std::string> parent(path.begin(), path.end() - 1);
    YAML::Node raw = child(child(schema_at(parent), "properties"), path.back());
    if (child(raw, "description")) return fragment(child(raw, "description").as<std::string>());
  }
  YAML::Node s = schema_at(path);
  if (child(s, "description")) return fragment(child(s, "description").as<std::string>());
  return {};
}

std::string number_in(const std::string& d) {
  auto pos = d.find_last_of("0123456789");
  if (pos == std::string::npos) return {};
  auto start = d.find_last_not_of("0123456789.-", pos);
  std::string n = d.substr(start == std::string::npos ? 0 : start + 1, pos - (start == std::string::npos ? 0 : start + 1) + 1);
  // std::to_string(double) prints "8.000000".
  if (auto dot = n.find('.'); dot != std::string::npos && n.find_first_not_of('0', dot + 1) == std::string::npos) n.erase(dot);
  return n;
}

Diagnostic schema_error(const Source& src, const YAML::Node& root, const std::vector<std::string>& path,
                        const std::string& d) {
  Located at = doc_at(root, path);
  const YAML::Node s = schema_at(path);
  std::string where = describe_path(root, path);
  if (d.find("could not be validated using 'properties'") != std::string::npos) {
    std::string key = last_quoted(d);
    Located k = doc_at(root, [&] { auto p = path; p.push_back(key); return p; }());
    std::vector<std::string> keys = schema_keys(s);
    std::string msg = "unknown key '" + quote(key) + "' in " + where + did_you_mean(key, keys);
    if (!keys.empty()) msg += " (expected one of: " + join(keys) + ")";
    return diag_at(src, k.key ? k.key : at.value, msg);
  }
  if (d.find("issing required property") != std::string::npos) {
    std::string key = last_quoted(d);
    std::string msg = "missing required key '" + key + "' in " + where;
    std::string what = description_at([&] { auto p = path; p.push_back(key); return p; }());
    if (!what.empty()) msg += " (" + what + ")";
    return diag_at(src, at.key ? at.key : at.value, msg);
  }
  if (d.find("'type' constraint") != std::string::npos) {
    return diag_at(src, at.value, "expected " + type_phrase(s) + " for " + where + ", but got " + yaml_kind(at.value));
  }
  if (d.find("enum") != std::string::npos && child(s, "enum")) {
    std::vector<std::string> options;
    for (const auto& o : child(s, "enum")) options.push_back(o.as<std::string>());
    std::string got = at.value.IsScalar() ? at.value.Scalar() : "";
    return diag_at(src, at.value, "unknown value " + yaml_kind(at.value) + " for " + where + did_you_mean(got, options) +
                                      " (expected one of: " + join(options) + ")");
  }
  if (d.find("'pattern'") != std::string::npos) {
    std::string why = description_at(path);
    if (why.empty()) why = "a value matching " + child(s, "pattern").as<std::string>("the pattern");
    return diag_at(src, at.value, invalid_value(root, path, at.value) + ": expected " + why);
  }
  if (d.find("no fewer than") != std::string::npos) {
    if (at.value.IsSequence()) return diag_at(src, at.value, where + " must not be an empty list; expected at least " + number_in(d) + " item(s)");
    return diag_at(src, at.value, where + " must not be empty");
  }
  if (d.find("Expected number less than") != std::string::npos) {
    return diag_at(src, at.value, "expected at most " + number_in(d) + " for " + where + ", but got " + yaml_kind(at.value));
  }
  if (d.find("Expected number greater than") != std::string::npos) {
    return diag_at(src, at.value, "expected at least " + number_in(d) + " for " + where + ", but got " + yaml_kind(at.value));
  }
  return diag_at(src, at.value, "invalid " + where + ": " + fragment(d));
}

// valijson's yaml-cpp adapter says every value is a string (isString() is
// always true), so `type: string` never fails and a 'pattern' or
// 'minLength' on a list or mapping throws from inside valijson. This walk
// finds those values first and reports them as type errors.
void check_strings(const Source& src, const YAML::Node& root, const YAML::Node& schema_node, const YAML::Node& doc,
                   std::vector<std::string>& path, std::vector<Diagnostic>& out) {
  YAML::Node s = resolve_ref(schema_node);
  if (!s || !s.IsMap() || !doc) return;
  if (YAML::Node any = child(s, "anyOf")) {
    if (doc.IsScalar()) return;
    for (const auto& branch : any) {
      YAML::Node b = resolve_ref(branch);
      std::vector<std::string> bt = types_of(b);
      std::string t = bt.size() == 1 ? bt[0] : "";
      if ((t == "array" && doc.IsSequence()) || (t == "object" && doc.IsMap())) {
        // valijson would try the other alternatives when this one fails, and
        // throw on a 'pattern' of a string alternative; integer items are
        // checked here so that it only sees lists that pass.
        YAML::Node items = resolve_ref(child(b, "items"));
        if (t == "array" && types_of(items) == std::vector<std::string>{"integer"}) {
          for (std::size_t i = 0; i < doc.size(); ++i) {
            const YAML::Node& seq = doc;
            YAML::Node item = seq[i];
            path.push_back(std::to_string(i));
            long long v = 0;
            std::string where = describe_path(root, path);
            if (!item.IsScalar() || !YAML::convert<long long>::decode(item, v)) {
              out.push_back(diag_at(src, item, "expected an integer for " + where + ", but got " + yaml_kind(item)));
            } else if (child(items, "minimum") && v < child(items, "minimum").as<long long>()) {
              out.push_back(diag_at(src, item, "expected at least " + child(items, "minimum").as<std::string>() + " for " +
                                                   where + ", but got " + yaml_kind(item)));
            } else if (child(items, "maximum") && v > child(items, "maximum").as<long long>()) {
              out.push_back(diag_at(src, item, "expected at most " + child(items, "maximum").as<std::string>() + " for " +
                                                   where + ", but got " + yaml_kind(item)));
            }
            path.pop_back();
          }
        }
        check_strings(src, root, b, doc, path, out);
        return;
      }
    }
    std::string what = description_at(path);
    out.push_back(diag_at(src, doc, invalid_value(root, path, doc) +
                                        (what.empty() ? std::string() : ": expected " + what)));
    return;
  }
  std::vector<std::string> types = types_of(s);
  std::string type = types.size() == 1 ? types[0] : "";
  bool scalar_only = !types.empty() && std::none_of(types.begin(), types.end(), [](const std::string& t) {
    return t == "object" || t == "array" || t == "null";
  });
  bool stringy = std::find(types.begin(), types.end(), "string") != types.end() || child(s, "pattern") ||
                 child(s, "minLength") || child(s, "enum");
  if (scalar_only && stringy && !doc.IsScalar()) {
    out.push_back(diag_at(src, doc, "expected " + type_phrase(s) + " for " + describe_path(root, path) + ", but got " + yaml_kind(doc)));
  } else if (type == "object" && doc.IsMap()) {
    YAML::Node props = child(s, "properties"), extra = child(s, "additionalProperties");
    for (const auto& kv : doc) {
      if (!kv.first.IsScalar()) continue;
      std::string key = kv.first.Scalar();
      YAML::Node sub = child(props, key);
      // rebind, not `sub = extra`: that would merge the static schema's node
      // memory with this call's, and the schema's set would grow with every
      // spec a process loads (each load slower than the last).
      if (!sub && extra && extra.IsMap()) rebind(sub, extra);
      if (!sub) continue;
      path.push_back(key);
      check_strings(src, root, sub, kv.second, path, out);
      path.pop_back();
    }
  } else if (type == "array" && doc.IsSequence() && child(s, "items")) {
    for (std::size_t i = 0; i < doc.size(); ++i) {
      path.push_back(std::to_string(i));
      const YAML::Node& seq = doc;
      check_strings(src, root, child(s, "items"), seq[i], path, out);
      path.pop_back();
    }
  }
}

bool under(const std::vector<std::string>& path, const std::vector<std::string>& prefix) {
  return path.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
}

}  // namespace

void validate(const Source& src, const YAML::Node& root, std::vector<Diagnostic>& errors) {
  {
    std::vector<std::string> path;
    std::vector<Diagnostic> found;
    check_strings(src, root, schema().root, root, path, found);
    if (!found.empty()) {
      errors.insert(errors.end(), found.begin(), found.end());
      return;
    }
  }
  std::vector<SchemaViolation> violations = run_valijson(root);
  if (violations.empty()) return;
  // valijson reports a chain per failure, from the leaf up to its parents
  // ("Failed to validate item #0 in array"); keep only the leaves. An anyOf
  // (ranks: a list or a range) fails with one error per alternative; those
  // become one message, or the item errors when the value is a list.
  struct Found {
    std::vector<std::string> path;
    std::string description;
  };
  std::vector<Found> leaves;
  std::vector<std::vector<std::string>> any_of;
  for (SchemaViolation& e : violations) {
    std::vector<std::string> path = path_of(e.context);
    if (e.description.find("anyOf") != std::string::npos) {
      any_of.push_back(path);
      continue;
    }
    if (e.description.rfind("Failed to validate", 0) == 0) continue;
    if (e.description.find("Failed to match") != std::string::npos && e.description.find("enum") == std::string::npos &&
        e.description.find("pattern") == std::string::npos)
      continue;
    leaves.push_back({std::move(path), e.description});
  }
  std::set<std::string> seen;
  std::vector<Diagnostic> found;
  auto add = [&](Diagnostic diag) {
    std::string key = diag.loc.str() + diag.message;
    if (seen.insert(key).second) found.push_back(std::move(diag));
  };
  for (const auto& a : any_of) {
    Located at = doc_at(root, a);
    bool items = false;
    if (at.value.IsSequence()) {
      for (const auto& l : leaves) items = items || (under(l.path, a) && l.path.size() > a.size());
    }
    if (!items) {
      std::string what = description_at(a);
      add(diag_at(src, at.value, invalid_value(root, a, at.value) +
                                     (what.empty() ? std::string() : ": expected " + what)));
    }
    std::erase_if(leaves, [&](const Found& l) { return under(l.path, a) && (!items || l.path.size() == a.size()); });
  }
  for (const auto& l : leaves) add(schema_error(src, root, l.path, l.description));
  if (found.empty()) found.push_back(diag_at(src, root, "the file does not match the spec schema"));
  errors.insert(errors.end(), found.begin(), found.end());
}


}  // namespace detail
}  // namespace wfgen::spec
