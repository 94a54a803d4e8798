#include "wfgen/emit/write_outputs.hpp"

#include <unistd.h>

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

}  // namespace wfgen::emit
