// The Subscript DSL corpus: every file tests/subscript/cases/*.txt holds
// blocks like
//
//   case: transpose
//   dsl: A[~ i j] -> A[~ j i]
//   arg: before=2,3          (any number; NAME=VALUE as for `wfgen shape --arg`)
//   in: 10x5x2               (any number, in order; `in:` alone is rank 0)
//   expect: ok               (or shape-error, parse-error, usage-error)
//   out: A (10 2 5) inplace=0   (one per output; `-` for an unnamed output)
//   contains: some words     (each must occur in the message)
//   category: rank           (shape-error: the JSON "category" of the first report)
//   column: 5                (parse-error: the 1-based column of the caret)
//   > exact report line      (when present: the whole message, line by line)
//
// Blocks are separated by blank lines; `#` starts a comment line. Each case
// runs through `wfgen::cli::shape()` twice (JSON and text) and, when the DSL
// parses, through subscript::parse + shape::check directly; all three must
// agree. A failing case is reported by file and name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "wfgen/cli/commands.hpp"
#include "wfgen/shape/shape.hpp"
#include "wfgen/subscript/subscript.hpp"

namespace fs = std::filesystem;

namespace {

// --- a minimal JSON reader, enough for `wfgen shape --json` -----------------

struct Json;
// A member of an object. (Not std::pair<std::string, Json>: a pair needs a
// complete Json, which Clang's libstdc++ checks inside Json's definition.)
struct JsonField;

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool b = false;
  long long num = 0;
  std::string str;
  std::vector<Json> items;
  std::vector<JsonField> fields;

  const Json* get(const std::string& key) const;
};

struct JsonField {
  std::string first;
  Json second;
};

const Json* Json::get(const std::string& key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}

  // Exactly one value, then only whitespace.
  Json document() {
    Json v = value();
    ws();
    if (i_ != s_.size()) fail("trailing text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("bad JSON at offset " + std::to_string(i_) + ": " + what + "\n" + s_);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    ws();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool word(const char* w) {
    std::size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) == 0) {
      i_ += n;
      return true;
    }
    return false;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("bad escape");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("bad \\u escape");
          out += static_cast<char>(std::stoi(s_.substr(i_, 4), nullptr, 16));
          i_ += 4;
          break;
        }
        default: fail("bad escape");
      }
    }
  }
  Json value() {
    ws();
    Json v;
    if (i_ >= s_.size()) fail("expected a value");
    char c = s_[i_];
    if (c == '{') {
      v.kind = Json::Kind::Object;
      ++i_;
      ws();
      if (s_[i_] == '}') return ++i_, v;
      while (true) {
        std::string k = string();
        expect(':');
        v.fields.push_back({k, value()});
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::Array;
      ++i_;
      ws();
      if (s_[i_] == ']') return ++i_, v;
      while (true) {
        v.items.push_back(value());
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::String;
      v.str = string();
      return v;
    }
    if (word("null")) return v;
    if (word("true")) return v.kind = Json::Kind::Bool, v.b = true, v;
    if (word("false")) return v.kind = Json::Kind::Bool, v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t start = i_;
      if (c == '-') ++i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      v.kind = Json::Kind::Number;
      v.num = std::stoll(s_.substr(start, i_ - start));
      return v;
    }
    fail("unexpected character");
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

// --- the corpus --------------------------------------------------------------

struct Case {
  std::string file;
  int line = 0;
  std::string name;
  std::string dsl;
  std::vector<std::string> args, inputs;
  std::string expect;
  std::vector<std::string> outs, contains;
  std::string category;
  int column = 0;
  std::vector<std::string> report;  // exact message lines
  bool has_report = false;
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::vector<Case> load_cases() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(WFGEN_TEST_DATA) / "subscript" / "cases"))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<Case> cases;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string raw;
    int lineno = 0;
    Case* cur = nullptr;
    while (std::getline(in, raw)) {
      ++lineno;
      if (!raw.empty() && raw.back() == '\r') raw.pop_back();
      if (raw.rfind("> ", 0) == 0 || raw == ">") {
        if (!cur) throw std::runtime_error(path.string() + ":" + std::to_string(lineno) + ": '>' outside a case");
        cur->has_report = true;
        cur->report.push_back(raw.size() > 2 ? raw.substr(2) : "");
        continue;
      }
      std::string line = trim(raw);
      if (line.empty()) {
        cur = nullptr;
        continue;
      }
      if (line[0] == '#') continue;
      auto colon = line.find(':');
      if (colon == std::string::npos) {
        throw std::runtime_error(path.string() + ":" + std::to_string(lineno) + ": expected 'key: value'");
      }
      std::string key = line.substr(0, colon), value = trim(line.substr(colon + 1));
      if (key == "case") {
        cases.push_back({});
        cur = &cases.back();
        cur->file = path.filename().string();
        cur->line = lineno;
        cur->name = value;
        continue;
      }
      if (!cur) throw std::runtime_error(path.string() + ":" + std::to_string(lineno) + ": '" + key + "' before 'case:'");
      if (key == "dsl") cur->dsl = value;
      else if (key == "arg") cur->args.push_back(value);
      else if (key == "in") cur->inputs.push_back(value == "\"\"" ? "" : value);
      else if (key == "expect") cur->expect = value;
      else if (key == "out") cur->outs.push_back(value);
      else if (key == "contains") cur->contains.push_back(value);
      else if (key == "column") cur->column = std::stoi(value);
      else if (key == "category") cur->category = value;
      else throw std::runtime_error(path.string() + ":" + std::to_string(lineno) + ": unknown key '" + key + "'");
    }
  }
  return cases;
}

std::string dim_text(const Json& d) {
  if (d.kind == Json::Kind::Number) return std::to_string(d.num);
  if (d.str.find(' ') != std::string::npos) return "{" + d.str + "}";
  return d.str;
}

// "A (10 2 5) inplace=0" / "- (10 10)" from one JSON output object.
std::string out_text(const Json& o) {
  std::string s;
  const Json* name = o.get("name");
  s += (name && name->kind == Json::Kind::String) ? name->str : "-";
  s += " (";
  const Json* shape = o.get("shape");
  if (shape) {
    for (std::size_t i = 0; i < shape->items.size(); ++i) s += (i ? " " : "") + dim_text(shape->items[i]);
  }
  s += ")";
  const Json* inplace = o.get("inplace_of");
  if (inplace && inplace->kind == Json::Kind::Number) s += " inplace=" + std::to_string(inplace->num);
  return s;
}

// The same line built from shape::check's result directly.
std::string out_text(const wfgen::shape::Output& o) {
  std::string s = o.name.value_or("-") + " " + wfgen::shape::shape_str(o.shape);
  if (o.inplace_of) s += " inplace=" + std::to_string(*o.inplace_of);
  return s;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  std::string line;
  while (std::getline(is, line)) out.push_back(line);
  return out;
}

// Runs one case; returns the list of problems (empty: it passes).
std::vector<std::string> run_case(const Case& c) {
  std::vector<std::string> problems;
  auto problem = [&](const std::string& p) { problems.push_back(p); };

  wfgen::cli::ShapeOptions o{c.dsl, c.args, c.inputs, true};
  std::ostringstream out, err;
  int code = wfgen::cli::shape(o, {out, err, false});
  o.json = false;
  std::ostringstream tout, terr;
  int tcode = wfgen::cli::shape(o, {tout, terr, false});

  int want_code = c.expect == "ok" ? 0 : c.expect == "shape-error" ? 1 : 2;
  if (code != want_code) problem("exit code " + std::to_string(code) + ", expected " + std::to_string(want_code));
  if (tcode != code) problem("text mode exit code " + std::to_string(tcode) + " differs from JSON mode " + std::to_string(code));
  if (!err.str().empty()) problem("--json wrote to stderr: " + err.str());

  Json doc;
  try {
    doc = JsonReader(out.str()).document();
  } catch (const std::exception& e) {
    problem(e.what());
    return problems;
  }
  if (doc.kind != Json::Kind::Object) return problem("the JSON output is not an object"), problems;
  const Json* ok = doc.get("ok");
  if (!ok || ok->kind != Json::Kind::Bool) return problem("no boolean \"ok\" in " + out.str()), problems;

  if (c.expect == "ok") {
    if (!ok->b) return problem("expected ok, got: " + out.str()), problems;
    if (doc.fields.size() != 2 || !doc.get("outputs")) problem("an ok object has exactly ok and outputs: " + out.str());
    const Json* outs = doc.get("outputs");
    std::vector<std::string> got;
    if (outs) {
      for (const auto& item : outs->items) {
        if (item.fields.size() != 3) problem("an output has exactly name, shape, inplace_of: " + out.str());
        got.push_back(out_text(item));
      }
    }
    if (got != c.outs) {
      std::string g, w;
      for (const auto& s : got) g += "\n   " + s;
      for (const auto& s : c.outs) w += "\n   " + s;
      problem("outputs differ; got:" + g + "\n  expected:" + w);
    }
    // Text mode prints one line per output and nothing on stderr.
    if (split_lines(tout.str()).size() != c.outs.size()) problem("text mode printed: " + tout.str());
    if (!terr.str().empty()) problem("text mode wrote to stderr: " + terr.str());
    return problems;
  }

  if (ok->b) return problem("expected " + c.expect + ", got: " + out.str()), problems;
  const Json* kind = doc.get("kind");
  const Json* message = doc.get("message");
  std::string want_kind = c.expect == "shape-error" ? "shape-error" : "parse-error";
  if (!kind || kind->str != want_kind) problem("kind is " + (kind ? kind->str : "missing") + ", expected " + want_kind);
  if (c.expect == "shape-error") {
    // ok, kind, category, message and reports: one per numbered report, each
    // with its category, symbol and text; the first one's category on top.
    const Json* category = doc.get("category");
    const Json* reports = doc.get("reports");
    if (doc.fields.size() != 5 || !category || !reports || reports->kind != Json::Kind::Array || reports->items.empty()) {
      problem("a shape-error object has exactly ok, kind, category, message, reports: " + out.str());
    } else {
      const Json* first = reports->items.front().get("category");
      if (!first || first->str != category->str) problem("category differs from the first report's: " + out.str());
      for (const auto& rep : reports->items) {
        const Json* text = rep.get("text");
        if (rep.fields.size() != 3 || !text || (message && message->str.find(text->str) == std::string::npos)) {
          problem("a report has category, symbol and a text that the message holds: " + out.str());
        }
      }
      if (!c.category.empty() && category->str != c.category) {
        problem("category is " + category->str + ", expected " + c.category);
      }
    }
  } else if (doc.fields.size() != 3) {
    problem("a failure object has exactly ok, kind, message: " + out.str());
  }
  std::string msg = message ? message->str : "";
  if (msg.find("internal error") != std::string::npos) problem("internal error: " + msg);
  for (const auto& word : c.contains) {
    if (msg.find(word) == std::string::npos) problem("the message lacks '" + word + "':\n" + msg);
  }
  if (c.column) {
    std::string where = "<subscript>:1:" + std::to_string(c.column) + ":";
    if (msg.rfind(where, 0) != 0) problem("expected the error at column " + std::to_string(c.column) + ":\n" + msg);
  }
  if (c.has_report && split_lines(msg) != c.report) problem("the report differs; got:\n" + msg);
  // Text mode prints the same message on stderr.
  std::string text = terr.str();
  if (text != msg && text != msg + "\n") problem("text mode message differs:\n" + text);
  if (!tout.str().empty()) problem("text mode wrote to stdout on failure: " + tout.str());
  return problems;
}

// The direct API agrees with the CLI.
std::vector<std::string> run_direct(const Case& c) {
  std::vector<std::string> problems;
  wfgen::subscript::Declaration decl;
  try {
    decl = wfgen::subscript::parse(c.dsl);
  } catch (const wfgen::subscript::ParseError& e) {
    if (c.expect != "parse-error") problems.push_back(std::string("subscript::parse failed: ") + e.what());
    else if (c.column && static_cast<int>(e.offset()) + 1 != c.column)
      problems.push_back("ParseError offset " + std::to_string(e.offset()) + " is not column " + std::to_string(c.column));
    return problems;
  }
  if (c.expect == "parse-error" && c.column) {
    problems.push_back("subscript::parse accepted a DSL line the corpus expects a parse error for");
    return problems;
  }
  // The normalised text parses again to the same declaration.
  try {
    auto again = wfgen::subscript::parse(decl.str());
    if (again.str() != decl.str()) problems.push_back("str() does not round-trip: " + decl.str() + " -> " + again.str());
  } catch (const std::exception& e) {
    problems.push_back("str() '" + decl.str() + "' does not parse: " + e.what());
  }
  wfgen::shape::Args args;
  std::vector<wfgen::shape::Shape> inputs;
  try {
    for (const auto& a : c.args) {
      auto eq = a.find('=');
      if (eq == std::string::npos) return problems;  // a usage error the CLI reports
      args[a.substr(0, eq)] = wfgen::shape::parse_value(a.substr(eq + 1));
    }
    for (const auto& s : c.inputs) inputs.push_back(wfgen::shape::parse_shape(s));
  } catch (const std::invalid_argument&) {
    return problems;  // ditto
  }
  auto r = wfgen::shape::check(decl, args, inputs);
  if (c.expect == "ok") {
    if (!r.ok()) problems.push_back("shape::check reports errors:\n" + wfgen::shape::render_report(decl, inputs, r));
    std::vector<std::string> got;
    for (const auto& o : r.outputs) got.push_back(out_text(o));
    if (got != c.outs) problems.push_back("shape::check outputs differ from the corpus");
  } else if (c.expect == "shape-error") {
    if (r.ok()) problems.push_back("shape::check found no error");
    for (const auto& rep : r.reports) {
      if (rep.offset && *rep.offset + rep.length > c.dsl.size() + 1) problems.push_back("a report points past the DSL text");
    }
  }
  return problems;
}

}  // namespace

TEST_CASE("the Subscript DSL corpus", "[subscript][corpus]") {
  std::vector<Case> cases = load_cases();
  REQUIRE(cases.size() >= 120);
  std::map<std::string, int> names;
  int failed = 0;
  for (const auto& c : cases) {
    if (++names[c.name] > 1) {
      ++failed;
      UNSCOPED_INFO("duplicate case name " << c.name);
    }
    std::vector<std::string> problems;
    if (c.dsl.empty() && c.expect != "usage-error" && c.expect != "parse-error") problems.push_back("no dsl");
    if (c.expect != "ok" && c.expect != "shape-error" && c.expect != "parse-error" && c.expect != "usage-error") {
      problems.push_back("expect must be ok, shape-error, parse-error or usage-error");
    }
    if (problems.empty()) {
      problems = run_case(c);
      auto direct = run_direct(c);
      problems.insert(problems.end(), direct.begin(), direct.end());
    }
    if (!problems.empty()) {
      ++failed;
      std::string all;
      for (const auto& p : problems) all += "\n  - " + p;
      UNSCOPED_INFO(c.file << ":" << c.line << ": case '" << c.name << "' (" << c.dsl << ") fails:" << all);
    }
  }
  INFO(cases.size() << " cases, " << failed << " failing");
  CHECK(failed == 0);
}
