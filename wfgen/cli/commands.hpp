// The CLI's subcommands as functions, so tests can run them in-process.
// Each returns the process exit code and writes to the given streams.
//
// Exit codes:
//   0  success
//   1  `wfgen shape`: the shapes do not check (a Shape-Error report)
//   2  bad input: YAML, schema, DSL, expression, C++ kernel or model errors
//      (a shape error found while tracing a model is one of these), bad usage
//   3  an internal error (a bug in wfgen)
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace wfgen::cli {

enum ExitCode { kOk = 0, kFailed = 1, kBadInput = 2, kInternal = 3 };

struct Streams {
  std::ostream& out;
  std::ostream& err;
  bool color = false;
};

struct CheckOptions {
  std::vector<std::filesystem::path> specs;
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
};
int gen(const GenOptions& options, Streams io);

struct DisasmOptions {
  std::vector<std::filesystem::path> specs;
  std::string build;  // empty: the only build
};
// Prints a build's instruction sequence offline, with symbolic shapes.
int disasm(const DisasmOptions& options, Streams io);

// Escapes a string for a JSON document.
std::string json_string(const std::string& s);

}  // namespace wfgen::cli
