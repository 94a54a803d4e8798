#include "wfgen/emit/write_outputs.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "wfgen/support/diagnostics.hpp"

namespace wfgen::emit {

namespace fs = std::filesystem;

namespace {

const char* kManifest = ".wfgen-outputs";

[[noreturn]] void fail(const fs::path& where, const std::string& message) {
  Diagnostic d;
  d.loc = SourceLoc{where.string(), 0, 0};
  d.message = message;
  throw UserError(d);
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Removes the temporary directory on every way out.
struct TempDir {
  fs::path path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

WriteReport write_outputs(const fs::path& dir, const std::vector<OutputFile>& files,
                          const std::function<void(const std::string&)>& progress) {
  WriteReport report;
  std::error_code ec;
  for (const auto& f : files) {
    fs::path rel(f.path);
    WFGEN_ASSERT(!rel.is_absolute() && rel.lexically_normal().string().rfind("..", 0) != 0,
                 "output path escapes the output directory: " + f.path);
  }
  fs::create_directories(dir, ec);
  if (ec) fail(dir, "cannot create the output directory: " + ec.message());
  // The temporary directory is a sibling inside dir, so renames stay on one file system.
  TempDir tmp;
  tmp.path = dir / (".wfgen-tmp-" + std::to_string(::getpid()));
  fs::remove_all(tmp.path, ec);
  fs::create_directories(tmp.path, ec);
  if (ec) fail(dir, "cannot write into the output directory: " + ec.message());
  std::vector<const OutputFile*> changed;
  std::string manifest;
  for (const auto& f : files) {
    manifest += f.path + "\n";
    auto old = read_file(dir / f.path);
    if (old && *old == f.text) {
      report.unchanged.push_back(f.path);
      continue;
    }
    fs::path t = tmp.path / f.path;
    fs::create_directories(t.parent_path(), ec);
    std::ofstream out(t, std::ios::binary);
    out << f.text;
    out.close();
    if (!out) fail(dir / f.path, "cannot write the generated file");
    changed.push_back(&f);
  }
  {
    std::ofstream out(tmp.path / kManifest, std::ios::binary);
    out << manifest;
    if (!out) fail(dir / kManifest, "cannot write the list of generated files");
  }
  // Everything is written: move it into place.
  for (const auto* f : changed) {
    fs::path dst = dir / f->path;
    fs::create_directories(dst.parent_path(), ec);
    fs::rename(tmp.path / f->path, dst, ec);
    if (ec) fail(dst, "cannot move the generated file into place: " + ec.message());
    report.written.push_back(f->path);
    if (progress) progress(f->path);
  }
  std::set<std::string> now;
  for (const auto& f : files) now.insert(f.path);
  if (auto old = read_file(dir / kManifest)) {
    std::istringstream lines(*old);
    std::string line;
    while (std::getline(lines, line)) {
      fs::path rel(line);
      if (line.empty() || now.count(line) || rel.is_absolute() || line.find("..") != std::string::npos) continue;
      if (fs::remove(dir / rel, ec)) report.removed.push_back(line);
    }
  }
  fs::rename(tmp.path / kManifest, dir / kManifest, ec);
  return report;
}

fs::path manifest_path(const fs::path& dir) { return dir / kManifest; }

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

struct Edit {
  char op;        // ' ', '-' or '+'
  std::size_t a;  // line in a (for ' ' and '-')
  std::size_t b;  // line in b (for ' ' and '+')
};

// The edit script from a to b: common prefix and suffix, and a longest
// common subsequence of what is left when that is small enough (generated
// files change in few places); a bigger middle is shown as removed + added.
std::vector<Edit> edit_script(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::size_t n = a.size(), m = b.size(), pre = 0, suf = 0;
  while (pre < n && pre < m && a[pre] == b[pre]) ++pre;
  while (suf < n - pre && suf < m - pre && a[n - 1 - suf] == b[m - 1 - suf]) ++suf;
  std::vector<Edit> out;
  for (std::size_t i = 0; i < pre; ++i) out.push_back({' ', i, i});
  std::size_t an = n - pre - suf, bn = m - pre - suf;
  if (an * bn <= 4'000'000) {
    // lcs[i][j]: length of the LCS of a[pre+i..] and b[pre+j..].
    std::vector<std::uint32_t> lcs((an + 1) * (bn + 1), 0);
    auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return lcs[i * (bn + 1) + j]; };
    for (std::size_t i = an; i-- > 0;)
      for (std::size_t j = bn; j-- > 0;)
        at(i, j) = a[pre + i] == b[pre + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    std::size_t i = 0, j = 0;
    while (i < an || j < bn) {
      if (i < an && j < bn && a[pre + i] == b[pre + j]) {
        out.push_back({' ', pre + i++, pre + j++});
      } else if (i < an && (j == bn || at(i + 1, j) >= at(i, j + 1))) {
        out.push_back({'-', pre + i++, pre + j});  // removals first, as diff -u prints them
      } else {
        out.push_back({'+', pre + i, pre + j++});
      }
    }
  } else {
    for (std::size_t i = 0; i < an; ++i) out.push_back({'-', pre + i, pre});
    for (std::size_t j = 0; j < bn; ++j) out.push_back({'+', pre + an, pre + j});
  }
  for (std::size_t k = 0; k < suf; ++k) out.push_back({' ', n - suf + k, m - suf + k});
  return out;
}

}  // namespace

std::string unified_diff(const std::string& a_text, const std::string& b_text, const std::string& a_name,
                         const std::string& b_name, int context) {
  if (a_text == b_text) return {};
  auto a = split_lines(a_text), b = split_lines(b_text);
  std::vector<Edit> edits = edit_script(a, b);
  std::string out = "--- " + a_name + "\n+++ " + b_name + "\n";
  std::size_t ctx = static_cast<std::size_t>(std::max(context, 0));
  std::size_t k = 0;
  while (k < edits.size()) {
    while (k < edits.size() && edits[k].op == ' ') ++k;
    if (k == edits.size()) break;
    // A hunk: from `ctx` lines before this change to `ctx` lines after the
    // last change that is at most 2*ctx equal lines away from the next one.
    std::size_t first = k >= ctx ? k - ctx : 0, last = k;
    for (std::size_t e = k; e < edits.size(); ++e) {
      if (edits[e].op != ' ') last = e;
      else if (e - last > 2 * ctx) break;
    }
    std::size_t end = std::min(edits.size(), last + ctx + 1);
    std::size_t a_len = 0, b_len = 0;
    for (std::size_t e = first; e < end; ++e) {
      if (edits[e].op != '+') ++a_len;
      if (edits[e].op != '-') ++b_len;
    }
    // Line numbers count from 1; an empty range names the line before it.
    std::size_t a_start = edits[first].a + (a_len ? 1 : 0), b_start = edits[first].b + (b_len ? 1 : 0);
    out += "@@ -" + std::to_string(a_start) + "," + std::to_string(a_len) + " +" + std::to_string(b_start) + "," +
           std::to_string(b_len) + " @@\n";
    for (std::size_t e = first; e < end; ++e) {
      const std::string& line = edits[e].op == '+' ? b[edits[e].b] : a[edits[e].a];
      out += edits[e].op + line + "\n";
    }
    k = end;
  }
  return out;
}

CheckReport check_outputs(const fs::path& dir, const std::vector<OutputFile>& files) {
  CheckReport report;
  std::set<std::string> now;
  for (const auto& f : files) {
    now.insert(f.path);
    auto old = read_file(dir / f.path);
    if (!old) {
      report.missing.push_back(f.path);
      report.diff += unified_diff("", f.text, "/dev/null", (dir / f.path).generic_string() + " (generated)");
    } else if (*old != f.text) {
      report.differ.push_back(f.path);
      report.diff += unified_diff(*old, f.text, (dir / f.path).generic_string(),
                                  (dir / f.path).generic_string() + " (generated)");
    }
  }
  if (auto old = read_file(dir / kManifest)) {
    std::istringstream lines(*old);
    std::string line;
    while (std::getline(lines, line))
      if (!line.empty() && !now.count(line) && fs::exists(dir / line)) report.stale.push_back(line);
  }
  return report;
}

void write_depfile(const fs::path& depfile, const fs::path& target, const std::vector<fs::path>& deps) {
  // Make's escaping: a space or '#' is preceded by '\', '$' doubled.
  auto escape = [](const std::string& p) {
    std::string out;
    for (char c : p) {
      if (c == ' ' || c == '#') out += '\\';
      if (c == '$') out += '$';
      out += c;
    }
    return out;
  };
  std::string text = escape(target.generic_string()) + ":";
  for (const auto& d : deps) text += " \\\n  " + escape(d.generic_string());
  text += "\n";
  std::error_code ec;
  if (depfile.has_parent_path()) fs::create_directories(depfile.parent_path(), ec);
  std::ofstream out(depfile, std::ios::binary);
  out << text;
  out.close();
  if (!out) fail(depfile, "cannot write the depfile");
}

}  // namespace wfgen::emit
