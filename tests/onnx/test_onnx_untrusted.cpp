// A model file is untrusted input: its names and doc strings are data in the
// spec the importer writes (tests/onnx/hostile_models.py compiles and runs
// such models, ctest onnx.hostile_names).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "wfgen/cli/import.hpp"
#include "wfgen/onnx/onnx_import.hpp"
#include "wfgen/onnx/untrusted.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace fs = std::filesystem;
using wfgen::onnx_import::escape_name;
using wfgen::onnx_import::yaml_quoted;

namespace {

// A fresh folder of this process: ctest runs the test cases as processes in parallel.
fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("wfgen-untrusted-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Z = (X + Y) * 2.0 with every name, the graph's doc string and the producer
// set by the caller.
onnx::ModelProto add_mul_model(const std::string& name, const std::string& doc) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.set_producer_name(name);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name(name);
  g->set_doc_string(doc);
  auto value = [](onnx::ValueInfoProto* v, const std::string& n) {
    v->set_name(n);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(3);
  };
  value(g->add_input(), "X" + name);
  value(g->add_input(), "Y" + name);
  value(g->add_output(), "Z" + name);
  auto* two = g->add_initializer();
  two->set_name("two" + name);
  two->set_data_type(onnx::TensorProto::FLOAT);
  two->add_float_data(2.0f);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name(name);
  add->set_doc_string(doc);
  add->add_input("X" + name);
  add->add_input("Y" + name);
  add->add_output("S" + name);
  auto* mul = g->add_node();
  mul->set_op_type("Mul");
  mul->set_name(name + "mul");
  mul->add_input("S" + name);
  mul->add_input("two" + name);
  mul->add_output("Z" + name);
  return m;
}

wfgen::onnx_import::Imported import_model(const onnx::ModelProto& m, const std::string& file) {
  fs::path dir = scratch("model");
  std::ofstream(dir / file, std::ios::binary) << m.SerializeAsString();
  wfgen::onnx_import::Options o;
  o.name = "hostile";
  struct Remove {
    fs::path dir;
    ~Remove() { fs::remove_all(dir); }
  } remove{dir};  // also when the import throws
  return wfgen::onnx_import::import_file((dir / file).string(), o);
}

const std::vector<std::string>& hostile_texts() {
  static const std::vector<std::string> texts = {
      "\nreturn X * 0.0\n", "a # b", "\"", "'", "*/", "\\", "x\\", ": {a: [b]}\n- !tag &anchor *alias | > % @ `",
      std::string("nul\0nul", 7), "cr\rlf\n", "\xe2\x80\xa8 u2028 \xc2\x85 nel", "\xff\xfe not utf-8",
      std::string(3000, '#'), std::string(2000, '\n') + "return Y",
  };
  return texts;
}

}  // namespace

TEST_CASE("escape_name: printable ASCII out, one-to-one", "[onnx][untrusted]") {
  CHECK(escape_name("fc.weight/0") == "fc.weight/0");
  CHECK(escape_name("a\nb") == "a\\nb");
  CHECK(escape_name("a\\nb") == "a\\\\nb");  // differs from the line above: names stay distinct
  CHECK(escape_name(std::string("\0\t\r\x7f\xc3\xa9", 6)) == "\\x00\\t\\r\\x7f\\xc3\\xa9");
  std::set<std::string> seen;
  for (const auto& s : hostile_texts()) {
    const std::string e = escape_name(s);
    for (char c : e) CHECK((c >= 0x20 && c < 0x7f));
    CHECK(seen.insert(e).second);
  }
}

TEST_CASE("yaml_quoted: a double-quoted scalar of printable ASCII that reads back as the text", "[onnx][untrusted]") {
  CHECK(yaml_quoted("a \"b\" \\ c\n") == "\"a \\\"b\\\" \\\\ c\\n\"");
  CHECK(yaml_quoted("caf\xc3\xa9 \xf0\x9f\x98\x80") == "\"caf\\u00e9 \\U0001f600\"");
  CHECK(yaml_quoted("\xff") == "\"\\ufffd\"");            // not UTF-8
  CHECK(yaml_quoted("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate is not UTF-8 either
  CHECK(yaml_quoted("\xe0\x80\xaf") == "\"\\ufffd\\ufffd\\ufffd\"");  // nor an overlong '/'
}

TEST_CASE("hostile names and doc strings stay data: the spec loads back with the graph's statements only",
          "[onnx][untrusted]") {
  for (const auto& text : hostile_texts()) {
    INFO("text: " << wfgen::quote(text, 80));
    onnx::ModelProto m = add_mul_model(text, text + "\n" + text);
    wfgen::onnx_import::Imported imp = import_model(m, "model.onnx");
    wfgen::spec::Spec s = wfgen::spec::load_text("hostile.yaml", imp.spec);
    REQUIRE(s.models.size() == 1);
    // The body: two statements and the return, whatever the names hold.
    std::istringstream body(s.models[0].call.value);
    std::vector<std::string> lines;
    for (std::string l; std::getline(body, l);)
      if (!l.empty()) lines.push_back(l);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].find(" + ") != std::string::npos);
    CHECK(lines[1].find(" * 2.0  # Mul '") != std::string::npos);
    CHECK(lines[2].rfind("return ", 0) == 0);
    // Every line of the spec is printable ASCII; the YAML comments are comments.
    for (char c : imp.spec) CHECK((c == '\n' || (c >= 0x20 && c < 0x7f)));
    // The doc string reads back as itself (UTF-8 kept, other bytes U+FFFD).
    if (text.find('\xff') == std::string::npos) CHECK(s.models[0].doc == text + "\n" + text);
  }
}

TEST_CASE("a file name is written escaped in the spec's first comment", "[onnx][untrusted]") {
  onnx::ModelProto m = add_mul_model("x", "");
  wfgen::onnx_import::Imported imp = import_model(m, "evil\nmodels: []\n.onnx");
  CHECK(imp.spec.find("from evil\\nmodels: []\\n.onnx (ONNX IR 7") != std::string::npos);
  CHECK(wfgen::spec::load_text("hostile.yaml", imp.spec).models.size() == 1);
}

TEST_CASE("a value named like a function the body calls does not shadow it", "[onnx][untrusted]") {
  onnx::ModelProto m = add_mul_model("", "");
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_output(0, "exp");
  g->mutable_node(1)->set_input(0, "exp");
  auto* e = g->add_node();
  e->set_op_type("Exp");
  e->add_input("Z");
  e->add_output("relu");
  g->mutable_output(0)->set_name("relu");
  wfgen::onnx_import::Imported imp = import_model(m, "model.onnx");
  CHECK(imp.spec.find("v_exp = X + Y") != std::string::npos);
  CHECK(imp.spec.find("v_relu = exp(Z)") != std::string::npos);
}

TEST_CASE("a name longer than the limit is an error", "[onnx][untrusted]") {
  onnx::ModelProto m = add_mul_model("", "");
  m.mutable_graph()->mutable_node(0)->set_name(std::string(5000, 'n'));
  CHECK_THROWS_WITH(import_model(m, "model.onnx"),
                    Catch::Contains("a node's name is 5000 bytes long ('nnnn") &&
                        Catch::Contains("names of up to 4096 bytes are accepted"));
}

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

}  // namespace

// tests/onnx/bad/, written by tests/onnx/bad_models.py: each <case>.onnx with
// the exact message beside it (<case>.expect) and its options (<case>.args).
TEST_CASE("every crafted bad model in tests/onnx/bad/ is refused with its message, and nothing is written", "[onnx][untrusted]") {
  const fs::path bad = fs::path(WFGEN_TEST_DATA) / "bad";
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(bad))
    if (e.path().extension() == ".onnx") models.push_back(e.path());
  std::sort(models.begin(), models.end());
  CHECK(models.size() >= 40);
  for (const auto& model : models) {
    INFO("case: " << model.stem().string());
    fs::path expect_file = fs::path(model).replace_extension(".expect"), args_file = fs::path(model).replace_extension(".args");
    REQUIRE(fs::exists(expect_file));
    std::string expect = read_text(expect_file);
    replace_all(expect, "{file}", model.string());
    replace_all(expect, "{parent}", fs::canonical(bad.parent_path()).string());
    fs::path out = scratch("bad");
    wfgen::cli::ImportOptions o;
    o.model = model;
    o.output = out / "model.yaml";
    if (fs::exists(args_file)) {
      std::istringstream args(read_text(args_file));
      std::string flag, value;
      while (args >> flag >> value) {
        REQUIRE(flag == "--max-data");
        o.max_data = value;
      }
    }
    std::ostringstream sout, serr;
    CHECK(wfgen::cli::import_onnx(o, {sout, serr, false}) == 2);
    std::string err = serr.str();
    while (!err.empty() && err.back() == '\n') err.pop_back();
    while (!expect.empty() && expect.back() == '\n') expect.pop_back();
    CHECK(err == model.string() + ": error: " + expect);
    CHECK(fs::is_empty(out));
    fs::remove_all(out);
  }
}

TEST_CASE("the option --max-data takes a size with a unit, and a model over it is refused before it is read", "[onnx][untrusted]") {
  fs::path dir = scratch("max-data");
  std::ofstream(dir / "m.onnx", std::ios::binary) << add_mul_model("", "").SerializeAsString();
  auto run = [&](const std::string& max_data, std::string& err) {
    wfgen::cli::ImportOptions o;
    o.model = dir / "m.onnx";
    o.output = dir / "out" / "m.yaml";
    fs::create_directories(dir / "out");
    o.max_data = max_data;
    o.quiet = true;
    std::ostringstream sout, serr;
    int code = wfgen::cli::import_onnx(o, {sout, serr, false});
    err = serr.str();
    return code;
  };
  std::string err;
  CHECK(run("64KiB", err) == 0);
  CHECK(run("1M", err) == 0);
  CHECK(run("50", err) == 2);
  CHECK(err.find("the model file is ") != std::string::npos);
  CHECK(err.find("over the limit of 50 bytes (--max-data raises it)") != std::string::npos);
  CHECK(run("12XB", err) == 2);
  CHECK(err == "error: --max-data expects a size such as 8GiB, 512MiB or a number of bytes, but got '12XB'\n");
  CHECK(run("99999999999999999999", err) == 2);
  fs::remove_all(dir);
}
