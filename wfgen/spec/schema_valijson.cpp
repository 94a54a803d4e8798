// The valijson half of schema_check.cpp: the embedded schema compiled once,
// and a spec document checked against it. valijson, nlohmann::json and
// std::regex are instantiated here only (see schema_check.hpp).
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "wfgen/spec/schema_check.hpp"

namespace wfgen::spec::detail {

namespace {

// The embedded schema, parsed once as JSON for valijson.
struct CompiledSchema {
  nlohmann::json json;
  valijson::Schema compiled;

  CompiledSchema() : json(nlohmann::json::parse(schema_text())) {
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(json);
    parser.populateSchema(adapter, compiled);
  }
};

const CompiledSchema& compiled_schema() {
  static const CompiledSchema s;
  return s;
}

// The YAML document as typed JSON, with YAML 1.2 core-schema resolution of
// plain scalars (quoted scalars are always strings), so the schema's types
// are checked strictly: `dtypes: 3` is a number, `name: "3"` a string.
nlohmann::json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : n) out[kv.first.Scalar()] = to_json(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : n) out.push_back(to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& v = n.Scalar();
      if (n.Tag() == "!") return v;  // quoted
      static const std::regex integer("[-+]?[0-9]+");
      static const std::regex real("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
      if (v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
      if (v == "true" || v == "True" || v == "TRUE") return true;
      if (v == "false" || v == "False" || v == "FALSE") return false;
      if (std::regex_match(v, integer)) {
        std::int64_t i;
        if (YAML::convert<std::int64_t>::decode(n, i)) return i;
        return v;  // out of range: stays text, and the typed reader reports it
      }
      if (std::regex_match(v, real)) {
        double d;
        if (YAML::convert<double>::decode(n, d)) return d;
      }
      return v;
    }
    default: return nullptr;
  }
}

}  // namespace

std::vector<SchemaViolation> run_valijson(const YAML::Node& root) {
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  nlohmann::json doc = to_json(root);
  valijson::adapters::NlohmannJsonAdapter adapter(doc);
  std::vector<SchemaViolation> out;
  if (validator.validate(compiled_schema().compiled, adapter, &results)) return out;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) out.push_back({std::move(e.context), std::move(e.description)});
  return out;
}

}  // namespace wfgen::spec::detail
