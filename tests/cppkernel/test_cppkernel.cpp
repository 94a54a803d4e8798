// Tests of wfgen::cppkernel::resolve: good kernels under data/good, and one
// bad kernel per error under data/bad, each with its expectation beside it:
//
//   // node: function=relu params=x:in,y:out,alpha:float dtypes=f32,f64 ranks=2
//   // expect: wrong_rank.cpp:5:11: error: parameter 'x' of 'relu' is ...
//
// Parameter kinds: in, out, int, float, bool, ints, floats; a tensor may fix
// its dtype or rank (`idx:out:i64`, `idx:out:r1`). Expected locations name
// the kernel file by its base name; spec-side errors point at spec.yaml:4:7.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "wfgen/cppkernel/cppkernel.hpp"

namespace fs = std::filesystem;
using namespace wfgen;
using namespace wfgen::cppkernel;
using rt::DType;

namespace {

const fs::path kData = fs::path(WFGEN_TEST_DATA) / "cppkernel" / "data";

SourceLoc spec_loc() { return SourceLoc{"spec.yaml", 4, 7}; }

ExpectedParam in(std::string name) { return {std::move(name), ParamKind::TensorIn}; }
ExpectedParam out(std::string name) { return {std::move(name), ParamKind::TensorOut}; }
ExpectedParam scalar(std::string name, ParamKind kind) { return {std::move(name), kind}; }

Expectation expect(std::string function, std::vector<ExpectedParam> params, std::vector<DType> dtypes,
                   std::vector<int> ranks) {
  return Expectation{std::move(function), std::move(params), std::move(dtypes), std::move(ranks), spec_loc()};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

DType parse_dtype(const std::string& s) {
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8})
    if (s == rt::dtype_name(d)) return d;
  FAIL("bad dtype in test header: " << s);
  return DType::f32;
}

ParamKind parse_kind(const std::string& s) {
  if (s == "in") return ParamKind::TensorIn;
  if (s == "out") return ParamKind::TensorOut;
  if (s == "int") return ParamKind::Int;
  if (s == "float") return ParamKind::Float;
  if (s == "bool") return ParamKind::Bool;
  if (s == "ints") return ParamKind::Ints;
  if (s == "floats") return ParamKind::Floats;
  FAIL("bad parameter kind in test header: " << s);
  return ParamKind::Int;
}

// "// node: function=f params=a:in,b:out dtypes=f32 ranks=1,2"
Expectation parse_node_line(const std::string& line) {
  Expectation e;
  e.spec_loc = spec_loc();
  for (const std::string& field : split(line.substr(line.find(':') + 1), ' ')) {
    auto eq = field.find('=');
    std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "function") {
      e.function = value;
    } else if (key == "params") {
      for (const std::string& p : split(value, ',')) {
        auto parts = split(p, ':');
        ExpectedParam ep{parts.at(0), parse_kind(parts.at(1))};
        for (std::size_t i = 2; i < parts.size(); ++i) {
          if (parts[i][0] == 'r') ep.fixed_rank = std::stoi(parts[i].substr(1));
          else ep.fixed_dtype = parse_dtype(parts[i]);
        }
        e.params.push_back(ep);
      }
    } else if (key == "dtypes") {
      for (const std::string& d : split(value, ',')) e.dtypes.push_back(parse_dtype(d));
    } else if (key == "ranks") {
      for (const std::string& r : split(value, ',')) e.ranks.push_back(std::stoi(r));
    }
  }
  return e;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// The first line of each rendered diagnostic, kernel paths shortened to base names.
std::vector<std::string> headlines(const UserError& e, const fs::path& file) {
  std::vector<std::string> out;
  for (const Diagnostic& d : e.diagnostics()) {
    std::string r = render(d);
    r = r.substr(0, r.find('\n'));
    replace_all(r, file.string(), file.filename().string());
    replace_all(r, (file.parent_path() / "inc").string() + "/", "inc/");
    out.push_back(r);
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------ good

TEST_CASE("template over dtype and rank serves every pair", "[cppkernel]") {
  auto file = kData / "good" / "template_t_r.cpp";
  KernelInfo k = resolve(file, expect("add", {in("A"), in("B"), out("C")},
                                      {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8}, {1, 2, 3, 4}));
  CHECK(k.function == "add");
  CHECK(k.file == file);
  CHECK(k.loc.line == 6);
  CHECK(k.loc.col == 6);
  CHECK(k.dtype_template);
  CHECK(k.rank_template);
  REQUIRE(k.overloads.size() == 1);
  CHECK(k.overloads[0].template_params == std::vector<TemplateParam>{TemplateParam::DType, TemplateParam::Rank});
  CHECK(k.callee(DType::f32, 2) == "add<float, 2>");
  CHECK(k.callee(DType::i64, 4) == "add<std::int64_t, 4>");
  CHECK(k.callee(DType::u8, 1) == "add<std::uint8_t, 1>");
}

TEST_CASE("template parameters in the other order, const-ref views and alias templates", "[cppkernel]") {
  KernelInfo k = resolve(kData / "good" / "template_r_t.cpp",
                         expect("copy", {in("src"), out("dst")}, {DType::f64, DType::i32}, {1, 3}));
  CHECK(k.dtype_template);
  CHECK(k.rank_template);
  CHECK(k.callee(DType::f64, 3) == "copy<3, double>");
  CHECK(k.callee(DType::i32, 1) == "copy<1, std::int32_t>");
}

TEST_CASE("template over the dtype only, with scalars of each kind", "[cppkernel]") {
  KernelInfo k = resolve(kData / "good" / "template_t_only.cpp",
                         expect("scale",
                                {in("x"), out("y"), scalar("alpha", ParamKind::Float),
                                 scalar("beta", ParamKind::Float), scalar("axis", ParamKind::Int),
                                 scalar("count", ParamKind::Int), scalar("accumulate", ParamKind::Bool),
                                 scalar("dims", ParamKind::Ints), scalar("weights", ParamKind::Floats)},
                                {DType::f32, DType::f64, DType::u8}, {2}));
  CHECK(k.dtype_template);
  CHECK_FALSE(k.rank_template);
  REQUIRE(k.overloads.size() == 1);
  CHECK(k.overloads[0].rank == 2);
  CHECK_FALSE(k.overloads[0].dtype.has_value());
  CHECK(k.callee(DType::f32, 2) == "scale<float>");
  CHECK(k.callee(DType::u8, 2) == "scale<std::uint8_t>");
}

TEST_CASE("template over the rank only", "[cppkernel]") {
  KernelInfo k = resolve(kData / "good" / "rank_only.cpp", expect("relu", {in("x"), out("y")}, {DType::f32}, {1, 2, 4}));
  CHECK_FALSE(k.dtype_template);
  CHECK(k.rank_template);
  CHECK(k.callee(DType::f32, 4) == "relu<4>");
}

TEST_CASE("concrete overloads together serve every pair, by qualified and unqualified names", "[cppkernel]") {
  ExpectedParam idx = out("idx");
  idx.fixed_dtype = DType::i64;
  for (const char* name : {"kernels::argmax", "argmax", "::kernels::argmax"}) {
    KernelInfo k = resolve(kData / "good" / "overloads.cpp",
                           expect(name, {in("x"), idx, scalar("axes", ParamKind::Ints)}, {DType::f32, DType::f64},
                                  {1, 2}));
    CHECK(k.function == "kernels::argmax");
    CHECK_FALSE(k.dtype_template);
    CHECK_FALSE(k.rank_template);
    // The declaration and the definition of the first overload are one entity.
    REQUIRE(k.overloads.size() == 4);
    CHECK(k.overloads[0].loc.line == 12);  // the definition, not the declaration on line 10
    CHECK(k.overloads[0].dtype == DType::f32);
    CHECK(k.overloads[0].rank == 1);
    CHECK(k.overloads[3].dtype == DType::f64);
    CHECK(k.overloads[3].rank == 2);
    CHECK(k.callee(DType::f64, 2) == "kernels::argmax");
    CHECK(&k.overload_for(DType::f64, 2) == &k.overloads[3]);
  }
}

TEST_CASE("a template and a concrete overload in an anonymous namespace, header from an -I dir", "[cppkernel]") {
  auto e = expect("negate", {in("x"), out("y")}, {DType::f32, DType::i32}, {1, 2});
  KernelInfo k = resolve(kData / "good" / "mixed.cpp", e, {"-I" + (kData / "include").string()});
  CHECK(k.function == "negate");
  REQUIRE(k.overloads.size() == 2);
  CHECK(k.dtype_template);
  CHECK(k.callee(DType::f32, 1) == "negate");  // the exact non-template overload wins
  CHECK(k.callee(DType::f32, 2) == "negate<float, 2>");
  CHECK(k.callee(DType::i32, 1) == "negate<std::int32_t, 1>");

  // Without the -I directory, the include is clang's first error.
  try {
    resolve(kData / "good" / "mixed.cpp", e);
    FAIL("expected an error");
  } catch (const UserError& err) {
    auto lines = headlines(err, kData / "good" / "mixed.cpp");
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] == "mixed.cpp:4:10: error: 'extra_helpers.hpp' file not found");
    CHECK(lines[1] == "spec.yaml:4:7: note: while reading kernel file 'mixed.cpp' for function 'negate'");
  }
}

TEST_CASE("parse time of one kernel file", "[cppkernel][time]") {
  auto file = kData / "good" / "template_t_only.cpp";
  auto e = expect("scale",
                  {in("x"), out("y"), scalar("alpha", ParamKind::Float), scalar("beta", ParamKind::Float),
                   scalar("axis", ParamKind::Int), scalar("count", ParamKind::Int),
                   scalar("accumulate", ParamKind::Bool), scalar("dims", ParamKind::Ints),
                   scalar("weights", ParamKind::Floats)},
                  {DType::f32}, {2});
  resolve(file, e);  // warm the file cache
  const int n = 5;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) resolve(file, e);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n;
  // Shown with -s: about 110 ms for a file including only runtime_types.hpp,
  // 250 ms with <span> and <vector> (Release-ish build, one core).
  INFO("resolve() of template_t_only.cpp (<span>, <vector>, runtime_types.hpp): " << ms << " ms per file");
  CHECK(ms < 2000);
}

// ------------------------------------------------------------------- bad

TEST_CASE("a missing kernel file is reported at the spec", "[cppkernel]") {
  auto e = expect("f", {in("x")}, {DType::f32}, {1});
  try {
    resolve(kData / "no_such_file.cpp", e);
    FAIL("expected an error");
  } catch (const UserError& err) {
    REQUIRE(err.diagnostics().size() == 1);
    CHECK(headlines(err, kData / "no_such_file.cpp")[0] ==
          "spec.yaml:4:7: error: cannot read kernel file 'no_such_file.cpp': no such file");
  }
  try {
    resolve(kData / "good", e);
    FAIL("expected an error");
  } catch (const UserError& err) {
    CHECK(headlines(err, kData / "good")[0] == "spec.yaml:4:7: error: kernel file 'good' is a directory");
  }
}

// WFGEN_UPDATE_EXPECT=1 rewrites the `// expect:` lines from what resolve()
// reports now (review the diff).
static void rewrite_expectations(const fs::path& file, const std::vector<std::string>& actual) {
  std::ifstream in(file);
  std::string line, text;
  bool written = false;
  while (std::getline(in, line)) {
    if (line.rfind("// expect: ", 0) == 0) {
      if (!written)
        for (const std::string& a : actual) text += "// expect: " + a + "\n";
      written = true;
      continue;
    }
    text += line + "\n";
  }
  in.close();
  std::ofstream(file) << text;
}

TEST_CASE("an error shows the kernel's source line with a caret under the parameter", "[cppkernel]") {
  auto file = kData / "bad" / "wrong_rank.cpp";
  try {
    resolve(file, expect("relu", {in("x"), out("y")}, {DType::f32}, {2}));
    FAIL("expected an error");
  } catch (const UserError& err) {
    REQUIRE(err.diagnostics().size() == 1);
    const Diagnostic& d = err.diagnostics()[0];
    CHECK(d.loc.file == file.string());
    std::string text = render(d);
    replace_all(text, file.string(), "wrong_rank.cpp");
    CHECK(text ==
          "wrong_rank.cpp:7:11: error: parameter 'x' of 'relu' is 'View<const float, 3>' of rank 3, "
          "expected rank 2 for input 'x'\n"
          "    void relu(View<const float, 3> x, View<float, 3> y);\n"
          "              ^~~~~~~~~~~~~~~~~~~~~~\n");
  }
}

TEST_CASE("bad kernels under data/bad report the expected errors", "[cppkernel]") {
  const char* update_env = std::getenv("WFGEN_UPDATE_EXPECT");
  const bool update = update_env && std::string(update_env) == "1";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kData / "bad"))
    if (entry.path().extension() == ".cpp") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 20);
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string line;
    Expectation e;
    std::vector<std::string> expected;
    while (std::getline(in, line)) {
      if (line.rfind("// node:", 0) == 0) e = parse_node_line(line);
      else if (line.rfind("// expect: ", 0) == 0) expected.push_back(line.substr(11));
    }
    INFO("kernel file " << file.filename().string());
    REQUIRE(!e.function.empty());
    REQUIRE(!expected.empty());
    try {
      resolve(file, e);
      FAIL("expected an error");
    } catch (const UserError& err) {
      INFO(err.render());
      if (update) rewrite_expectations(file, headlines(err, file));
      else CHECK(headlines(err, file) == expected);
      // Every error at the kernel file shows its source line and caret.
      for (const Diagnostic& d : err.diagnostics())
        if (d.loc.file == file.string()) CHECK(!d.source_line.empty());
    }
  }
}
