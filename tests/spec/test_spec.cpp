// Good paths of the spec loader and of `wfgen check` / `wfgen gen`.
// (Bad paths: test_bad_specs.cpp and the corpus in tests/spec/bad/.)
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "wfgen/cli/commands.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace fs = std::filesystem;
using namespace wfgen;
using spec::ArgType;
using spec::BodyKind;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory under the system's temp dir, removed at the end.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path = fs::temp_directory_path() / ("wfgen_test_spec_" + tag + "_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).generic_string()] = read_file(e.path());
  return out;
}

const char* kFull = R"yaml(# A spec that uses every key of nodes and impls.
nodes:
  - name: Scale
    args:
      alpha: {type: float, default: 0.5, doc: "the factor"}
      times: {type: int, default: 3}
      on: {type: bool, default: true}
      shape: {type: ints, default: [1, 2, 3]}
      weights: {type: floats, default: [0.25, 1e-3]}
      plain: {type: int}
    where: "X[~ i] OUT[~ i] -> OUT[~ i]"
    slots:
      seen: {type: bool, default: false}
    save_for_backward: [true, false]
    backward: {X: "mul_scalar(dout, alpha)"}
    out_scalar: false
    extends: [Unary]
    doc: "OUT <- alpha * X"
  - name: Unary
    where: "X[~] OUT[~] -> OUT[~]"
  - name: Total
    where: "X[~ i] OUT[~ 1] -> OUT[~ 1]"
    out_scalar: true
  - name: MM
    where: "A[~ i j] B[~ j k] C[~ i k] -> C[~ i k]"
  - name: Pick
    where: "W[n d] IDX[~] OUT[~ d] -> OUT[~ d]"
  - name: Flip
    where: "A[~ i j] -> A[~ j i]"
  - name: Mine
    where: "X[~] OUT[~] -> OUT[~]"
impls:
  - node: Scale
    device: cpu
    dtypes: [f32, f64]
    ranks: [3, 1, 1]
    reject: "is_integer || alpha > 10"
    elementwise: "X * alpha"
    parallel: {grain: 4096}
    doc: "scales"
  - {node: Total, device: cpu, dtypes: [f32], ranks: "1..3", reduce: {op: mean, prologue: "X * X", epilogue: "sqrt(acc)"}}
  - {node: MM, device: blas, dtypes: [f64], gemm: true}
  - {node: MM, device: cpu, dtypes: [i32], gemm: true}
  - {node: Pick, device: cpu, dtypes: [u8, i64], builtin: gather}
  - {node: Flip, device: cpu, dtypes: [f32], view: transpose}
  - {node: Mine, device: cpu, dtypes: [f32], cpp: {file: kernels/./mine.cpp, function: my::mine}}
ops:
  - {name: Twice, where: "X[~] OUT[~] -> OUT[~]", device: cpu, dtypes: [f32], elementwise: "X * 2"}
)yaml";

}  // namespace

TEST_CASE("a spec with every key loads into typed fields", "[spec]") {
  spec::Spec s = spec::load_text("dir/full.yaml", kFull);
  REQUIRE(s.nodes.size() == 8);
  REQUIRE(s.impls.size() == 8);
  CHECK(s.files == std::vector<std::string>{"dir/full.yaml"});

  const spec::Node* scale = s.find_node("Scale");
  REQUIRE(scale);
  CHECK(scale->loc.str() == "dir/full.yaml:3:11");
  REQUIRE(scale->args.size() == 6);
  // Arguments keep their order of the file.
  CHECK(scale->args[0].name == "alpha");
  CHECK(scale->args[0].type == ArgType::Float);
  CHECK(std::get<double>(*scale->args[0].default_value) == 0.5);
  CHECK(scale->args[0].doc == "the factor");
  CHECK(scale->args[0].loc.str() == "dir/full.yaml:5:7");
  CHECK(scale->args[1].type == ArgType::Int);
  CHECK(std::get<std::int64_t>(*scale->args[1].default_value) == 3);
  CHECK(scale->args[2].type == ArgType::Bool);
  CHECK(std::get<bool>(*scale->args[2].default_value) == true);
  CHECK(scale->args[3].type == ArgType::Ints);
  CHECK(std::get<std::vector<std::int64_t>>(*scale->args[3].default_value) == std::vector<std::int64_t>{1, 2, 3});
  CHECK(spec::arg_value_str(*scale->args[3].default_value) == "(1 2 3)");
  CHECK(scale->args[4].type == ArgType::Floats);
  CHECK(std::get<std::vector<double>>(*scale->args[4].default_value) == std::vector<double>{0.25, 1e-3});
  CHECK(scale->args[5].name == "plain");
  CHECK(!scale->args[5].default_value);
  CHECK(std::string(spec::arg_type_name(scale->args[4].type)) == "floats");
  REQUIRE(scale->slots.size() == 1);
  CHECK(scale->slots[0].name == "seen");
  CHECK(scale->slots[0].type == ArgType::Bool);
  CHECK(std::get<bool>(*scale->slots[0].default_value) == false);
  CHECK(scale->where_text.value == "X[~ i] OUT[~ i] -> OUT[~ i]");
  CHECK(scale->where.inputs.size() == 2);
  CHECK(scale->where.outputs.size() == 1);
  CHECK(scale->save_for_backward == std::vector<bool>{true, false});
  REQUIRE(scale->backward.size() == 1);
  CHECK(scale->backward[0].first == "X");
  CHECK(scale->backward[0].second.value == "mul_scalar(dout, alpha)");
  CHECK(scale->backward[0].second.loc.str() == "dir/full.yaml:15:20");
  CHECK(!scale->out_scalar);
  CHECK(scale->extends == std::vector<std::string>{"Unary"});
  CHECK(scale->doc == "OUT <- alpha * X");
  CHECK(!scale->from_stdlib);
  CHECK(s.find_node("Total")->out_scalar);
  CHECK(s.find_node("Twice"));
  CHECK(!s.find_node("scale"));

  auto impl = [&](const std::string& node, const std::string& device) -> const spec::Impl& {
    for (const spec::Impl* i : s.impls_of(node))
      if (i->device == device) return *i;
    FAIL("no impl " << node << " " << device);
    throw;
  };
  const spec::Impl& sc = impl("Scale", "cpu");
  CHECK(sc.kind == BodyKind::Elementwise);
  CHECK(sc.dtypes == std::vector<rt::DType>{rt::DType::f32, rt::DType::f64});
  CHECK(sc.ranks == std::vector<int>{1, 3});  // sorted, unique
  REQUIRE(sc.reject);
  CHECK(sc.reject->value == "is_integer || alpha > 10");
  CHECK(sc.elementwise.value == "X * alpha");
  CHECK(sc.elementwise.loc.str() == "dir/full.yaml:38:19");
  CHECK(sc.parallel_grain == 4096);
  CHECK(sc.doc == "scales");
  CHECK(sc.loc.str() == "dir/full.yaml:33:11");

  const spec::Impl& total = impl("Total", "cpu");
  CHECK(total.kind == BodyKind::Reduce);
  CHECK(total.reduce_op == spec::ReduceOp::Mean);
  CHECK(total.ranks == std::vector<int>{1, 2, 3});
  REQUIRE(total.prologue);
  CHECK(total.prologue->value == "X * X");
  REQUIRE(total.epilogue);
  CHECK(total.epilogue->value == "sqrt(acc)");
  CHECK(total.parallel_grain == 0);
  CHECK(std::string(spec::reduce_op_name(total.reduce_op)) == "mean");

  CHECK(impl("MM", "blas").kind == BodyKind::Gemm);
  CHECK(impl("MM", "blas").ranks.empty());
  CHECK(impl("MM", "cpu").dtypes == std::vector<rt::DType>{rt::DType::i32});
  CHECK(impl("Pick", "cpu").kind == BodyKind::Builtin);
  CHECK(impl("Pick", "cpu").builtin == "gather");
  CHECK(impl("Flip", "cpu").kind == BodyKind::View);
  CHECK(impl("Flip", "cpu").view == "transpose");
  const spec::Impl& mine = impl("Mine", "cpu");
  CHECK(mine.kind == BodyKind::Cpp);
  CHECK(mine.cpp_file == fs::path("dir/kernels/mine.cpp"));
  CHECK(mine.cpp_function.value == "my::mine");
  const spec::Impl& twice = impl("Twice", "cpu");
  CHECK(twice.kind == BodyKind::Elementwise);
  CHECK(twice.elementwise.value == "X * 2");
  for (int k = 0; k <= static_cast<int>(BodyKind::View); ++k)
    CHECK(std::string(spec::body_kind_name(static_cast<BodyKind>(k))) != "?");
}

TEST_CASE("Text::at maps offsets of a value back into the file", "[spec]") {
  const char* text =
      "nodes:\n"
      "  - name: A1\n"
      "    where: \"X[i] -> X[i]\"\n"            // line 3, value at col 13
      "  - name: A2\n"
      "    where: 'Y[j] -> Y[j]'\n"              // line 5, col 13
      "  - name: A3\n"
      "    where: Z[k] -> Z[k]\n"                // line 7, col 12
      "  - name: A4\n"
      "    where: |\n"
      "      P[a b]\n"                           // line 10, col 7
      "        -> P[b a]\n"                      // line 11, col 7 (the extra indent is content)
      "  - name: A5\n"
      "    where: {a: 1}\n";
  // The last node makes the file invalid; load the first four only.
  std::string good(text, std::string(text).find("  - name: A5"));
  spec::Spec s = spec::load_text("t.yaml", good);
  REQUIRE(s.nodes.size() == 4);
  const auto& dq = s.nodes[0].where_text;
  CHECK(dq.at(0).str() == "t.yaml:3:13");
  CHECK(dq.at(5).str() == "t.yaml:3:18");
  CHECK(dq.exact);
  const auto& sq = s.nodes[1].where_text;
  CHECK(sq.at(0).str() == "t.yaml:5:13");
  CHECK(sq.at(8).str() == "t.yaml:5:21");
  const auto& plain = s.nodes[2].where_text;
  CHECK(plain.at(0).str() == "t.yaml:7:12");
  CHECK(plain.at(11).str() == "t.yaml:7:23");
  const auto& block = s.nodes[3].where_text;
  CHECK(block.value == "P[a b]\n  -> P[b a]\n");
  CHECK(block.at(0).str() == "t.yaml:10:7");
  CHECK(block.at(2).str() == "t.yaml:10:9");
  CHECK(block.at(7).str() == "t.yaml:11:7");
  CHECK(block.at(12).str() == "t.yaml:11:12");
  // The end of the value is the end of its last line, not a line after it.
  CHECK(block.at(block.value.size()).str() == "t.yaml:11:18");
  // Escapes make columns approximate: the start is still right.
  spec::Spec esc = spec::load_text("e.yaml", "nodes:\n  - name: E\n    where: \"X[i] \\t-> X[i]\"\n");
  CHECK(!esc.nodes[0].where_text.exact);
  CHECK(esc.nodes[0].where_text.at(0).str() == "e.yaml:3:13");
}

TEST_CASE("an empty file and a missing file are errors with their name", "[spec]") {
  TempDir dir("empty");
  fs::path empty = dir.write("empty.yaml", "");
  try {
    spec::load({empty});
    FAIL("loaded an empty file");
  } catch (const UserError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].loc.file == empty.string());
    CHECK(e.diagnostics()[0].message.find("the spec file is empty") != std::string::npos);
  }
  try {
    spec::load({dir.path / "missing.yaml", dir.path});
    FAIL("loaded a missing file");
  } catch (const UserError& e) {
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[0].message.find("cannot read the spec file") != std::string::npos);
    CHECK(e.diagnostics()[1].message.find("is a directory") != std::string::npos);
  }
  // A file over the size limit is refused before it is parsed.
  fs::path big = dir.write("big.yaml", "nodes: []\n" + std::string(100, '#') + "\n");
  spec::LoadOptions small;
  small.max_file_bytes = 50;
  CHECK_THROWS_WITH(spec::load({big}, small), Catch::Contains("more than the limit of 50 bytes"));
  // Errors of several files are all collected.
  fs::path a = dir.write("a.yaml", "nodes:\n  - name: A\n    whre: x\n");
  fs::path b = dir.write("b.yaml", "nodez: []\n");
  try {
    spec::load({a, b});
    FAIL("loaded bad files");
  } catch (const UserError& e) {
    std::set<std::string> files;
    for (const auto& d : e.diagnostics()) files.insert(d.loc.file);
    CHECK(files == std::set<std::string>{a.string(), b.string()});
  }
}

TEST_CASE("loading the same bad file twice gives the same diagnostics", "[spec]") {
  // The schema is parsed once and shared; reporting errors must not change it.
  auto once = [] {
    try {
      spec::load_text("x.yaml", "nodes:\n  - name: A\n    whre: x\nimpls:\n  - {node: A, device: cpu, dtypes: [f32], ranks: \"1..9\"}\n");
    } catch (const UserError& e) {
      return e.render();
    }
    return std::string("no error");
  };
  std::string first = once();
  CHECK(first.find("unknown key 'whre'") != std::string::npos);
  CHECK(first.find("invalid ranks '1..9'") != std::string::npos);
  CHECK(once() == first);
  CHECK_NOTHROW(spec::load_text("ok.yaml", kFull));
}

TEST_CASE("the standard library loads and the user's specs override it", "[spec][stdlib]") {
  spec::Spec std_only = spec::load_with_stdlib({});
  CHECK(std_only.files == spec::stdlib_files());
  const spec::Node* add = std_only.find_node("add");
  REQUIRE(add);
  CHECK(add->from_stdlib);
  CHECK(std_only.impls_of("matmul").size() == 2);
  for (const auto& i : std_only.impls) CHECK(i.from_stdlib);

  TempDir dir("stdlib");
  // A user node named like a standard one replaces it and its impls.
  fs::path user = dir.write("user.yaml", R"yaml(nodes:
  - name: add
    args: {bias: {type: float, default: 1.0}}
    where: "A[~] B[~] OUT[~] -> OUT[~]"
    doc: "mine"
impls:
  - {node: add, device: cpu, dtypes: [f32], elementwise: "A + B + bias"}
  - {node: matmul, device: blas, dtypes: [f32], ranks: [2], gemm: true}
)yaml");
  spec::Spec s = spec::load_with_stdlib({user});
  int adds = 0;
  for (const auto& n : s.nodes) adds += n.name == "add";
  CHECK(adds == 1);
  add = s.find_node("add");
  REQUIRE(add);
  CHECK(!add->from_stdlib);
  CHECK(add->doc == "mine");
  REQUIRE(s.impls_of("add").size() == 1);
  CHECK(s.impls_of("add")[0]->dtypes == std::vector<rt::DType>{rt::DType::f32});
  CHECK(!s.impls_of("add")[0]->from_stdlib);
  // A user impl replaces the standard impl of the same node and device only.
  auto mm = s.impls_of("matmul");
  REQUIRE(mm.size() == 2);
  for (const auto* i : mm) {
    if (i->device == "blas") {
      CHECK(!i->from_stdlib);
      CHECK(i->ranks == std::vector<int>{2});
    } else {
      CHECK(i->device == "cpu");
      CHECK(i->from_stdlib);
    }
  }
  CHECK(s.find_node("matmul")->from_stdlib);
  // Without the standard library the impl of matmul has no node.
  CHECK_THROWS_WITH(spec::load({user}), Catch::Contains("implementation of unknown node 'matmul'"));
}

TEST_CASE("wfgen check prints one line per node and exits 0, or diagnostics and 2", "[spec][cli]") {
  TempDir dir("check");
  fs::path good = dir.write("good.yaml", "nodes:\n  - name: Add\n    where: \"A[~] B[~] -> A[~]\"\n  - name: T\n    where: \"A[i j] -> A[j i]\"\n");
  std::ostringstream out, err;
  CHECK(cli::check({{good}}, {out, err, false}) == cli::kOk);
  CHECK(err.str().empty());
  CHECK(out.str() == "node Add: A[~] B[~] -> A[~]  (" + good.string() + ":2:11)\n" +
                         "node T: A[i j] -> A[j i]  (" + good.string() + ":4:11)\n" + "ok: 1 file, 2 nodes, 0 impls, 0 models, 0 builds\n");

  fs::path one = dir.write("one.yaml", "nodes:\n  - {name: One, where: \"[x] -> [x]\"}\n");
  std::ostringstream out2, err2;
  CHECK(cli::check({{good, one}}, {out2, err2, false}) == cli::kOk);
  CHECK(out2.str().ends_with("ok: 2 files, 3 nodes, 0 impls, 0 models, 0 builds\n"));

  fs::path bad = dir.write("bad.yaml", "nodes:\n  - name: Add\n    wher: \"A[~] -> A[~]\"\n");
  std::ostringstream out3, err3;
  CHECK(cli::check({{good, bad}}, {out3, err3, false}) == cli::kBadInput);
  CHECK(out3.str().empty());
  CHECK(err3.str() == bad.string() + ":3:5: error: unknown key 'wher' in node 'Add'; did you mean 'where'? (expected one of: "
                                     "name, args, where, slots, save_for_backward, backward, out_scalar, extends, out_dtype, indices, doc)\n"
                                     "        wher: \"A[~] -> A[~]\"\n"
                                     "        ^~~~\n" +
                          bad.string() + ":2:5: error: missing required key 'where' in node 'Add' (the Subscript DSL line, e.g. "
                                         "\"A[~ i j] B[~ j k] C[~ i k] -> C[~ i k]\")\n"
                                         "      - name: Add\n"
                                         "        ^\n"
                                         "2 errors generated.\n");
  // Color only when asked.
  std::ostringstream out4, err4;
  CHECK(cli::check({{bad}}, {out4, err4, true}) == cli::kBadInput);
  CHECK(err4.str().find("\033[") != std::string::npos);
}

namespace {

const char* kGenSpec = R"yaml(nodes:
  - name: Axpy
    args: {a: {type: float, default: 2.0}}
    where: "X[~] Y[~] OUT[~] -> OUT[~]"
    doc: "OUT <- a X + Y"
  - name: Rowsum
    where: "X[~ i] OUT[~ 1] -> OUT[~ 1]"
impls:
  - {node: Axpy, device: cpu, dtypes: [f32, i32], ranks: "1..2", elementwise: "a * X + Y"}
  - {node: Rowsum, device: cpu, dtypes: [f64], ranks: [1, 2], reduce: {op: sum}}
)yaml";

int run_gen(const std::vector<fs::path>& specs, const fs::path& out_dir, std::string* listed = nullptr,
            std::string* errors = nullptr) {
  cli::GenOptions o;
  o.specs = specs;
  o.output = out_dir;
  o.list_outputs = listed != nullptr;
  std::ostringstream out, err;
  int rc = cli::gen(o, {out, err, false});
  if (listed) *listed = out.str();
  if (errors) *errors = err.str();
  return rc;
}

}  // namespace

TEST_CASE("wfgen gen is deterministic, lists its outputs and rewrites only what changed", "[spec][gen]") {
  TempDir dir("gen");
  fs::path spec_file = dir.write("specs/ops.yaml", kGenSpec);
  fs::path out1 = dir.path / "out1", out2 = dir.path / "elsewhere" / "out2";
  std::string err;
  REQUIRE(run_gen({spec_file}, out1, nullptr, &err) == cli::kOk);
  CHECK(err.empty());
  REQUIRE(run_gen({spec_file}, out2) == cli::kOk);
  auto a = snapshot(out1), b = snapshot(out2);
  CHECK(a == b);  // byte-identical across output directories
  CHECK(a.size() >= 3);
  bool names_kernel = false;
  for (const auto& [path, text] : a) names_kernel = names_kernel || text.find("axpy_f32_r2") != std::string::npos;
  CHECK(names_kernel);

  // --list-outputs: exactly the files written (the manifest aside), and
  // nothing is written.
  std::string listed;
  fs::path out3 = dir.path / "out3";
  REQUIRE(run_gen({spec_file}, out3, &listed) == cli::kOk);
  CHECK(!fs::exists(out3));
  std::set<std::string> listed_set, written;
  std::istringstream in(listed);
  for (std::string l; std::getline(in, l);) listed_set.insert(fs::relative(l, out3).generic_string());
  for (const auto& [path, text] : a)
    if (path != ".wfgen-outputs") written.insert(path);
  CHECK(listed_set == written);

  // A second run into the same directory leaves unchanged files alone.
  std::map<std::string, fs::file_time_type> mtimes;
  for (const auto& [path, text] : a) mtimes[path] = fs::last_write_time(out1 / path);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(run_gen({spec_file}, out1) == cli::kOk);
  for (const auto& [path, text] : a)
    if (path != ".wfgen-outputs") CHECK(fs::last_write_time(out1 / path) == mtimes[path]);
  CHECK(snapshot(out1) == a);

  // Outputs of an earlier run that this run does not write are removed;
  // files wfgen did not write are kept.
  dir.write("out1/notes.txt", "mine\n");
  std::string spec2 = kGenSpec;
  spec2 = spec2.substr(0, spec2.find("  - name: Rowsum")) + "impls:\n" +
          "  - {node: Axpy, device: cpu, dtypes: [f32, i32], ranks: \"1..2\", elementwise: \"a * X + Y\"}\n";
  fs::path spec_file2 = dir.write("specs/ops2.yaml", spec2);
  REQUIRE(run_gen({spec_file2}, out1) == cli::kOk);
  auto c = snapshot(out1);
  CHECK(c.count("notes.txt") == 1);
  std::set<std::string> removed;
  for (const auto& [path, text] : a)
    if (!c.count(path)) removed.insert(path);
  CHECK(!removed.empty());
  for (const auto& r : removed) CHECK(r.find("rowsum") != std::string::npos);
  for (const auto& [path, text] : c) CHECK(text.find("rowsum_f64") == std::string::npos);

  // An error leaves the directory exactly as it was.
  auto before = snapshot(out1);
  fs::path bad = dir.write("specs/bad.yaml", "nodes:\n  - name: Bad\n    where: \"X[~] OUT[~] -> OUT[~]\"\n"
                                             "impls:\n  - {node: Bad, device: cpu, dtypes: [i32], elementwise: \"exp(X)\"}\n");
  REQUIRE(run_gen({spec_file2, bad}, out1, nullptr, &err) == cli::kBadInput);
  CHECK(err.find(bad.string() + ":5:") != std::string::npos);
  CHECK(snapshot(out1) == before);
  // --node with an unknown name is a usage error with a suggestion.
  cli::GenOptions o;
  o.specs = {spec_file};
  o.output = out1;
  o.nodes = {"Axpi"};
  std::ostringstream out, err2;
  CHECK(cli::gen(o, {out, err2, false}) == cli::kBadInput);
  CHECK(err2.str().find("did you mean 'Axpy'?") != std::string::npos);
}

TEST_CASE("docs/specs.md describes every key of the spec schema", "[spec][docs]") {
  std::string docs = read_file(fs::path(WFGEN_SOURCE_DIR) / "docs" / "specs.md");
  REQUIRE(!docs.empty());
  // Every property name of every object in the schema.
  std::string schema(spec::schema_text());
  std::set<std::string> keys;
  std::regex props(R"re("properties"\s*:\s*\{)re");
  for (auto it = std::sregex_iterator(schema.begin(), schema.end(), props); it != std::sregex_iterator(); ++it) {
    std::size_t pos = static_cast<std::size_t>(it->position() + it->length());
    int depth = 1;
    while (pos < schema.size() && depth > 0) {
      if (schema[pos] == '{') {
        ++depth;
      } else if (schema[pos] == '}') {
        --depth;
      } else if (schema[pos] == '"') {
        // A string (skipped whole: descriptions contain braces); at depth 1, a key.
        std::size_t end = pos + 1;
        while (end < schema.size() && schema[end] != '"') end += schema[end] == '\\' ? 2 : 1;
        if (depth == 1) keys.insert(schema.substr(pos + 1, end - pos - 1));
        pos = end;
      }
      ++pos;
    }
  }
  CHECK(keys.size() > 20);
  for (const auto& k : {"nodes", "impls", "ops", "where", "save_for_backward", "grain", "prologue", "function"})
    CHECK(keys.count(k) == 1);
  for (const auto& k : keys) {
    INFO("key: " << k);
    // Documented as `key` (in code spans), so that a mere word does not count.
    CHECK(docs.find("`" + k + "`") != std::string::npos);
  }
  // And every enum value (dtypes, arg types, reduce ops, builtins, views).
  std::regex enums(R"re("enum"\s*:\s*\[([^\]]*)\])re");
  for (auto it = std::sregex_iterator(schema.begin(), schema.end(), enums); it != std::sregex_iterator(); ++it) {
    std::string list = (*it)[1];
    std::regex word(R"re("([^"]+)")re");
    for (auto w = std::sregex_iterator(list.begin(), list.end(), word); w != std::sregex_iterator(); ++w) {
      INFO("enum value: " << (*w)[1]);
      CHECK(docs.find("`" + std::string((*w)[1]) + "`") != std::string::npos);
    }
  }
}
