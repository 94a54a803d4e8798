// The CLI's subcommands as functions, so tests can run them in-process.
// Each returns the process exit code and writes to the given streams.
//
// Exit codes (docs/cli.md lists them for users):
//   0  success
//   1  `wfgen shape`: the shapes do not check (a Shape-Error report);
//      `wfgen gen --check`: the directory differs from what would be generated;
//      `wfgen init`: a file it would write exists already
//   2  bad input: YAML, schema, DSL, expression, C++ kernel or model errors
//      (a shape error found while tracing a model is one of these), bad usage
//   3  an internal error (a bug in wfgen)
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "wfgen/support/diagnostics.hpp"

namespace wfgen::cli {

enum ExitCode { kOk = 0, kFailed = 1, kBadInput = 2, kInternal = 3 };

struct Streams {
  std::ostream& out;
  std::ostream& err;
  bool color = false;
};

struct CheckOptions {
  std::vector<std::filesystem::path> specs;
  bool warnings_as_errors = false;  // a warning fails the check (exit 2)
};
int check(const CheckOptions& options, Streams io);

struct ShapeOptions {
  std::string dsl;
  std::vector<std::string> args;    // NAME=VALUE
  std::vector<std::string> inputs;  // DIMS
  bool json = false;
};
int shape(const ShapeOptions& options, Streams io);

struct GenOptions {
  std::vector<std::filesystem::path> specs;
  std::filesystem::path output;
  bool stdlib = false;              // also every kernel of the standard library
  std::vector<std::string> nodes;   // only these nodes
  std::vector<std::string> builds;  // only these builds (default: every build)
  std::vector<std::string> dump_after;  // print the graph after these passes
  bool time_passes = false;
  std::string ns = "wfgen_kernels";
  bool list_outputs = false;        // print the files it would write, write nothing
  bool progress = false;            // a line per file written (on a terminal)
  bool verbose = false;             // the summary line and every file written, also when piped
  bool quiet = false;               // nothing but errors
  bool check = false;               // compare with the output directory, write nothing
  std::filesystem::path depfile;    // also write a Makefile-style depfile here
  bool no_fuse = false;             // no paths, no automatic fusion (as `fuse: false` on every build)
  bool warnings_as_errors = false;  // a warning is an error: nothing is written, exit 2
  int jobs = 1;                     // threads for the builds and kernel files (the output does not depend on it)
  // Only kernels of these dtypes / ranks / devices among the impls selected
  // (the kernels a build calls are always generated). Empty: all.
  std::vector<std::string> dtypes;
  std::vector<int> ranks;
  std::vector<std::string> devices;
};
int gen(const GenOptions& options, Streams io);

struct InitOptions {
  std::filesystem::path dir;
  std::string name;  // project name; empty: from the directory name
  bool quiet = false;
};
// Writes a minimal working project (spec, CMakeLists.txt, main.cpp) into
// `dir`; writes nothing when one of those files exists already.
int init(const InitOptions& options, Streams io);

// The spec path as wfgen records it in generated files: relative to the
// current directory (so regenerating from another checkout gives the same
// bytes), or as given when it is not under the current directory's root.
std::filesystem::path stable_spec_path(const std::filesystem::path& spec);

struct DisasmOptions {
  std::vector<std::filesystem::path> specs;
  std::string build;  // empty: the only build
  bool no_fuse = false;
};
// Prints a build's instruction sequence offline, with symbolic shapes.
int disasm(const DisasmOptions& options, Streams io);

struct ExplainOptions {
  std::vector<std::filesystem::path> specs;
  std::string build;  // empty: the only build
};
// Prints each rewrite the paths and automatic fusion made in a build (which
// path or group, where), then the disassembly without and with them.
int explain(const ExplainOptions& options, Streams io);

// The warnings of the user's models (lint, see trace.hpp) and of traced
// builds, sorted by place, each once. With `as_errors` they are printed as
// errors ("[-Werror,-Wname]"). Returns how many there were.
std::size_t print_warnings(std::vector<Diagnostic> warnings, bool as_errors, Streams io);

// Escapes a string for a JSON document.
std::string json_string(const std::string& s);

}  // namespace wfgen::cli
