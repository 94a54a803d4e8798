// The corpus of bad spec files: tests/spec/bad/*.yaml.
//
// Each file starts with the diagnostics it must produce, one per line:
//
//   # expect: 4:11: unknown key 'whre' in node 'Add'; did you mean 'where'?
//
// LINE:COL (or ?:? when the error has no position), then text the message
// must contain (normally the whole message). A trailing "[no caret]" says the
// diagnostic shows no source line. Files named *.gen.yaml are run through
// `wfgen gen` (errors found when planning kernels), the others through
// spec::load. For every expectation the test checks the exit status, the
// location, the message, and that the rendered diagnostic shows the offending
// line with a caret under the column; `gen` must leave its output directory
// exactly as it was.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "wfgen/cli/commands.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace fs = std::filesystem;

namespace {

struct Expect {
  int line = 0, col = 0;  // 0: no position
  std::string text;
  bool caret = true;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Expect> expectations(const std::string& text) {
  std::vector<Expect> out;
  std::istringstream in(text);
  std::string line;
  static const std::regex re(R"(^# expect: (\d+|\?):(\d+|\?): (?:error: )?(.*)$)");
  while (std::getline(in, line)) {
    if (line.rfind("# expect:", 0) != 0) continue;
    std::smatch m;
    REQUIRE(std::regex_match(line, m, re));
    Expect e;
    e.line = m[1] == "?" ? 0 : std::stoi(m[1]);
    e.col = m[2] == "?" ? 0 : std::stoi(m[2]);
    e.text = m[3];
    const std::string marker = " [no caret]";
    if (e.text.size() > marker.size() && e.text.ends_with(marker)) {
      e.text.erase(e.text.size() - marker.size());
      e.caret = false;
    }
    out.push_back(e);
  }
  return out;
}

// The caret line for a diagnostic at `col` of `source_line`, as render() prints it.
std::string caret_prefix(const std::string& source_line, int col) {
  std::string pad = "    ";
  for (int i = 0; i + 1 < col && i < static_cast<int>(source_line.size()); ++i)
    if ((static_cast<unsigned char>(source_line[i]) & 0xC0) != 0x80) pad += ' ';
  return pad + "^";
}

std::string shown(const std::string& line) {
  std::string out;
  for (char c : line) out += c == '\t' || (static_cast<unsigned char>(c) < 0x20) ? (c == '\t' ? ' ' : '?') : c;
  return out;
}

// Checks that `rendered` (one or more diagnostics as printed) has a diagnostic
// at file:line:col whose message contains e.text, followed by the offending
// line and a caret under the column.
void check_rendered(const std::string& rendered, const std::string& file, const std::vector<std::string>& lines,
                    const Expect& e) {
  std::string head = file + (e.line ? ":" + std::to_string(e.line) + ":" + std::to_string(e.col) : "") + ": error: ";
  std::istringstream in(rendered);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  auto it = std::find_if(out.begin(), out.end(), [&](const std::string& l) {
    return l.rfind(head, 0) == 0 && l.find(e.text) != std::string::npos;
  });
  INFO("looking for: " << head << e.text);
  REQUIRE(it != out.end());
  if (!e.caret || e.line == 0) return;
  REQUIRE(e.line <= static_cast<int>(lines.size()));
  const std::string& src = lines[static_cast<std::size_t>(e.line - 1)];
  std::size_t at = static_cast<std::size_t>(it - out.begin());
  bool has_source = at + 1 < out.size() && out[at + 1] == "    " + shown(src);
  bool has_caret = has_source && at + 2 < out.size() && out[at + 2].rfind(caret_prefix(src, e.col), 0) == 0 &&
                   out[at + 2].size() > caret_prefix(src, e.col).size() - 1;
  CHECK(has_source);
  CHECK(has_caret);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Every file below `dir` with its bytes, to see that gen changed nothing.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string rel = fs::relative(e.path(), dir).generic_string();
    out[rel] = e.is_regular_file() ? read_file(e.path()) : std::string("<dir>");
  }
  return out;
}

}  // namespace

TEST_CASE("bad spec files fail with the diagnostics written beside them", "[spec][bad]") {
  fs::path dir = fs::path(WFGEN_TEST_DATA) / "spec" / "bad";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 150);  // issue 10: a corpus of at least 150 bad inputs

  fs::path out_dir = fs::temp_directory_path() / ("wfgen_bad_specs_" + std::to_string(::getpid()));
  fs::remove_all(out_dir);
  fs::create_directories(out_dir / "sub");
  {
    std::ofstream(out_dir / "keep.txt") << "an earlier output\n";
    std::ofstream(out_dir / "sub" / "old.cpp") << "// stale\n";
  }
  const auto before = snapshot(out_dir);

  for (const auto& path : files) {
    std::string name = path.filename().string();
    SECTION(name) {
      std::string text = read_file(path);
      std::vector<Expect> expect = expectations(text);
      INFO("file: " << path.string());
      REQUIRE(!expect.empty());
      std::vector<std::string> lines = split_lines(text);
      bool gen = name.ends_with(".gen.yaml");
      if (gen) {
        std::ostringstream out, err;
        wfgen::cli::GenOptions o;
        o.specs = {path};
        o.output = out_dir;
        int rc = wfgen::cli::gen(o, {out, err, false});
        INFO("stderr:\n" << err.str());
        CHECK(rc == wfgen::cli::kBadInput);
        CHECK(out.str().empty());
        for (const auto& e : expect) check_rendered(err.str(), path.string(), lines, e);
        CHECK(err.str().find(std::to_string(expect.size()) + " error") != std::string::npos);
        // No partial output: the directory (and no temporary directory in
        // it) is exactly as it was.
        CHECK(snapshot(out_dir) == before);
      } else {
        std::vector<wfgen::Diagnostic> diags;
        try {
          wfgen::spec::load({path});
          FAIL("spec::load accepted " << name);
        } catch (const wfgen::UserError& e) {
          diags = e.diagnostics();
        }
        std::string rendered = wfgen::UserError(diags).render(false);
        INFO("diagnostics:\n" << rendered);
        CHECK(diags.size() == expect.size());
        for (const auto& e : expect) {
          bool found = std::any_of(diags.begin(), diags.end(), [&](const wfgen::Diagnostic& d) {
            return d.loc.line == e.line && d.loc.col == e.col && d.message.find(e.text) != std::string::npos &&
                   d.loc.file == path.string();
          });
          CHECK(found);
          check_rendered(rendered, path.string(), lines, e);
        }
        // Messages start lowercase, end without a period, carry no control characters.
        for (const auto& d : diags) {
          CHECK(!d.message.empty());
          CHECK(d.message.back() != '.');
          CHECK(std::none_of(d.message.begin(), d.message.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }));
        }
        // The command line says the same and exits with 2.
        std::ostringstream out, err;
        CHECK(wfgen::cli::check({{path}}, {out, err, false}) == wfgen::cli::kBadInput);
        CHECK(err.str().find(rendered) == 0);
      }
    }
  }
  fs::remove_all(out_dir);
}

// --- bad files that cannot carry their expectation inside ----------------------------
//
// Made at test time in a temporary folder: an empty file, one of blanks, a
// UTF-16 file, a 100 MB file, a folder, a file that does not exist, and a
// C++ kernel reached through a symbolic link out of the project. Each must
// fail spec::load with the expected diagnostic, make `wfgen check` exit with
// 2 and leave the output folder of `wfgen gen` as it was.
TEST_CASE("bad files made at test time: empty, blank, UTF-16, 100 MB, a folder, missing, a link out", "[spec][bad]") {
  fs::path dir = fs::temp_directory_path() / ("wfgen_bad_files_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "out");
  std::ofstream(dir / "out" / "keep.cpp") << "// an earlier output\n";
  const auto before = snapshot(dir / "out");
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return dir / name;
  };

  struct Case {
    fs::path path;
    int line, col;  // 0: no position
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({write("empty.yaml", ""), 1, 1, "the spec file is empty; expected a mapping with 'nodes'"});
  cases.push_back({write("blank.yaml", "\n   \n\n"), 1, 1, "the spec file is empty"});
  {
    std::string utf16 = "\xFF\xFE";
    for (char c : std::string("nodes: []\n")) utf16 += std::string{c, '\0'};
    cases.push_back({write("utf16.yaml", utf16), 1, 1, "this file is UTF-16 or UTF-32 (it starts with a byte-order mark)"});
  }
  {
    // 100 MB: valid YAML at the start, then a sparse tail; refused by size
    // before a byte of it is parsed.
    fs::path big = write("big.yaml", "nodes:\n  - name: A\n    where: \"X[~] -> X[~]\"\n");
    fs::resize_file(big, 100u << 20);
    cases.push_back({big, 0, 0, "the spec file is 104857600 bytes, more than the limit of 16777216 bytes"});
  }
  fs::create_directories(dir / "folder.yaml");
  cases.push_back({dir / "folder.yaml", 0, 0, "is a directory; expected a YAML spec file"});
  cases.push_back({dir / "missing.yaml", 0, 0, "cannot read the spec file: No such file or directory"});
  fs::create_directories(dir / "kernels");
  fs::create_symlink("/etc/passwd", dir / "kernels" / "k.cpp");
  cases.push_back({write("link_out.yaml", "nodes:\n  - name: K\n    where: \"X[~] OUT[~] -> OUT[~]\"\n"
                                          "impls:\n  - {node: K, device: cpu, dtypes: [f32], cpp: {file: kernels/k.cpp, function: k}}\n"),
                   5, 55, "the C++ file 'kernels/k.cpp' of the cpu implementation of 'K' is a link to '/etc/passwd', outside the spec's folder"});

  for (const auto& c : cases) {
    SECTION(c.path.filename().string()) {
      INFO(c.path.string());
      std::vector<wfgen::Diagnostic> diags;
      try {
        wfgen::spec::load({c.path});
        FAIL("spec::load accepted " << c.path);
      } catch (const wfgen::UserError& e) {
        diags = e.diagnostics();
      }
      std::string rendered = wfgen::UserError(diags).render(false);
      INFO(rendered);
      REQUIRE(diags.size() == 1);
      CHECK(diags[0].loc.file == c.path.string());
      CHECK(diags[0].loc.line == c.line);
      CHECK(diags[0].loc.col == c.col);
      CHECK(diags[0].message.find(c.message) != std::string::npos);

      std::ostringstream out, err;
      CHECK(wfgen::cli::check({{c.path}}, {out, err, false}) == wfgen::cli::kBadInput);
      wfgen::cli::GenOptions o;
      o.specs = {c.path};
      o.output = dir / "out";
      std::ostringstream gout, gerr;
      CHECK(wfgen::cli::gen(o, {gout, gerr, false}) == wfgen::cli::kBadInput);
      CHECK(gerr.str().find(c.message) != std::string::npos);
      CHECK(snapshot(dir / "out") == before);
    }
  }
  fs::remove_all(dir);
}

// --- models no build uses: `wfgen check` checks them too ----------------------------
//
// Each file of tests/spec/check/ has models but no build. `# expect:` lines
// are the errors `wfgen check` must report (exit 2), `# note:` lines the
// notes for what it cannot decide without the models' arguments (exit 0
// when there is no error). spec::load accepts every one of them.
TEST_CASE("wfgen check checks the bodies of models no build uses", "[spec][check]") {
  fs::path dir = fs::path(WFGEN_TEST_DATA) / "spec" / "check";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 8);
  for (const auto& path : files) {
    SECTION(path.filename().string()) {
      const std::string text = read_file(path);
      const std::vector<std::string> lines = split_lines(text);
      std::vector<Expect> errors = expectations(text);
      std::vector<std::string> notes;
      static const std::regex note_re(R"(^# note: (\d+):(\d+): (.*)$)");
      for (const auto& l : lines) {
        std::smatch m;
        if (std::regex_match(l, m, note_re)) notes.push_back(path.string() + ":" + std::string(m[1]) + ":" + std::string(m[2]) + ": note: " + std::string(m[3]));
      }
      REQUIRE((!errors.empty() || !notes.empty()));
      CHECK_NOTHROW(wfgen::spec::load({path}));
      std::ostringstream out, err;
      int rc = wfgen::cli::check({{path}}, {out, err, false});
      INFO("stderr:\n" << err.str());
      CHECK(rc == (errors.empty() ? wfgen::cli::kOk : wfgen::cli::kBadInput));
      for (const auto& e : errors) check_rendered(err.str(), path.string(), lines, e);
      if (!errors.empty()) CHECK(err.str().find(std::to_string(errors.size()) + " error") != std::string::npos);
      for (const auto& n : notes) CHECK(err.str().find(n + "\n") != std::string::npos);
    }
  }
}
