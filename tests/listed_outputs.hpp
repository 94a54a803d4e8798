// The names of the files `wfgen gen SPECS -o OUT --namespace NS --list-outputs`
// would write, for tests that check a CMakeLists.txt's explicit list of
// generated sources against what wfgen really generates.
#pragma once

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "wfgen/cli/commands.hpp"

namespace wfgen::test {

// Empty when wfgen refuses the specs (the caller's check then fails).
inline std::set<std::string> listed_outputs(const std::vector<std::filesystem::path>& specs, const std::filesystem::path& out,
                                            const std::string& ns) {
  std::ostringstream o, err;
  wfgen::cli::GenOptions opts;
  opts.specs = specs;
  opts.output = out;
  opts.ns = ns;
  opts.list_outputs = true;
  if (wfgen::cli::gen(opts, {o, err, false}) != wfgen::cli::kOk) return {};
  std::istringstream lines(o.str());
  std::set<std::string> names;
  for (std::string l; std::getline(lines, l);)
    if (!l.empty()) names.insert(std::filesystem::path(l).filename().string());
  return names;
}

}  // namespace wfgen::test
