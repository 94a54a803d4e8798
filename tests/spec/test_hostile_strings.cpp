// Accepted specs whose free-text strings are hostile: docs (of nodes,
// arguments, impls, models, parameters, builds) and body comments holding
// quotes, backslashes (also at the very end), `*/`, `/*`, newlines followed by
// C++ or preprocessor lines, trigraphs and `"); system("...`. They reach the
// generated code only as comments; this test generates the code, checks that
// every line showing such text is a `//` comment that cannot continue onto
// the next line, and compiles every generated file with -fsyntax-only (and
// -Werror=comment, which catches a `//` comment continued by a backslash).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "wfgen/cli/commands.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace fs = std::filesystem;

namespace {

// In YAML double quotes: \" is a quote, \\ a backslash, \n a newline.
const char* const kHostile[] = {
    R"(HOSTILE \"); system(\"rm -rf /\"); // \\)",
    R"(HOSTILE */ int injected_a = 1; /* ??/)",
    R"(HOSTILE\n#define injected_b 1\nint injected_c = 1;\n\\)",
    R"(HOSTILE ??= ??( ??) ??' ??< ??> ??! ??- ??/)",
    R"(HOSTILE \t tab \r return \u00e9 \x07 bell \\\\)",
};

std::string hostile_spec() {
  int k = 0;
  auto h = [&] { return std::string("\"") + kHostile[k++ % std::size(kHostile)] + "\""; };
  std::string s;
  s += "nodes:\n  - name: Harmless\n    args: {alpha: {type: float, default: 0.5, doc: " + h() + "}}\n";
  s += "    where: \"X[~] OUT[~] -> OUT[~]\"\n    doc: " + h() + "\n";
  s += "impls:\n  - {node: Harmless, device: cpu, dtypes: [f32], ranks: [2], elementwise: \"X * alpha\", doc: " + h() + "}\n";
  s += "models:\n  - name: Net\n    args: {n: {type: int}}\n";
  s += "    params: {W: {shape: [n, n], init: xavier, doc: " + h() + "}}\n";
  s += "    where: \"X[batch n] -> Y[batch n]\"\n    doc: " + h() + "\n";
  s += "    call: |\n";
  s += "      # HOSTILE comment \"); system(\"x\"); */ \\\n";
  s += "      h = X @ W  # HOSTILE trailing ?\?/\n";
  s += "      return Harmless(h)  # HOSTILE \\\n";
  s += "builds:\n  - {name: net, model: Net, args: {n: 3}, dtype: f32, devices: [cpu], doc: " + h() + "}\n";
  return s;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("hostile strings in accepted specs reach generated C++ only as comments that stay comments", "[spec][hostile]") {
  fs::path dir = fs::temp_directory_path() / ("wfgen_hostile_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string spec_text = hostile_spec();
  std::ofstream(dir / "hostile.yaml") << spec_text;
  INFO(spec_text);

  wfgen::cli::GenOptions o;
  o.specs = {dir / "hostile.yaml"};
  o.output = dir / "gen";
  o.ns = "hostile";
  std::ostringstream out, err;
  REQUIRE(wfgen::cli::gen(o, {out, err, false}) == wfgen::cli::kOk);

  int files = 0, marked = 0;
  for (const auto& e : fs::directory_iterator(dir / "gen")) {
    ++files;
    std::istringstream text(read_file(e.path()));
    int n = 0;
    for (std::string line; std::getline(text, line);) {
      ++n;
      INFO(e.path().filename().string() << ":" << n << ": " << line);
      // No line continues onto the next one (a backslash or the trigraph ??/ at its end).
      CHECK(!line.ends_with("\\"));
      CHECK(!line.ends_with("?\?/"));
      CHECK(line.find('\r') == std::string::npos);
      for (const char* word : {"HOSTILE", "injected", "system("}) {
        std::size_t at = line.find(word);
        if (at == std::string::npos) continue;
        ++marked;
        std::size_t comment = line.find("//");
        CHECK(comment < at);  // only ever inside a // comment
      }
    }
  }
  CHECK(files >= 4);
  CHECK(marked >= 1);  // the node doc does reach the generated code (as a comment)

  // Every generated source compiles; -Werror=comment fails on a // comment
  // that a backslash continues.
  for (const auto& e : fs::directory_iterator(dir / "gen")) {
    if (e.path().extension() != ".cpp" && e.path().extension() != ".hpp") continue;
    std::string cmd = std::string(WFGEN_CXX) + " -std=c++20 -fsyntax-only -Wall -Werror=comment -Werror=trigraphs -I '" +
                      WFGEN_SOURCE_DIR + "/runtime/include' -I '" + (dir / "gen").string() + "' -x c++ '" +
                      e.path().string() + "' 2>&1";
    INFO(cmd);
    CHECK(std::system(cmd.c_str()) == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("well-formed UTF-8 of 2, 3 and 4 bytes is accepted in docs, a lone continuation byte is not", "[spec][hostile]") {
  const std::string ok = "nodes:\n  - name: A\n    where: \"X[~] -> X[~]\"\n    doc: \"caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80\"\n";
  CHECK_NOTHROW(wfgen::spec::load_text("utf8.yaml", ok));
  const std::string bad = "nodes:\n  - name: A\n    where: \"X[~] -> X[~]\"\n    doc: \"\xF0\x9F\x98 \x80\"\n";
  try {
    wfgen::spec::load_text("bad.yaml", bad);
    FAIL("a truncated 4-byte sequence was accepted");
  } catch (const wfgen::UserError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].loc.line == 4);
    CHECK(e.diagnostics()[0].loc.col == 11);
    CHECK(e.diagnostics()[0].message.find("not valid UTF-8 (the byte 0xf0") != std::string::npos);
  }
}
