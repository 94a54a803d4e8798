// wfgen: the command line. It only wires the stages together; each
// subcommand is a function in commands.hpp.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

#include "wfgen/cli/commands.hpp"
#ifdef WFGEN_WITH_ONNX
#include "wfgen/cli/import.hpp"
#include "wfgen/passes/passes.hpp"
#endif
#include "wfgen/subscript/subscript.hpp"
#include "wfgen/support/diagnostics.hpp"

#ifndef WFGEN_VERSION
#define WFGEN_VERSION "0.1.0"
#endif

int main(int argc, char** argv) {
  using namespace wfgen;
  CLI::App app{"wfgen: ahead-of-time code generator for tensor programs described in YAML specs"};
  app.set_version_flag("--version", std::string("wfgen ") + WFGEN_VERSION);
  app.require_subcommand(1);
  // Global flags, accepted before or after the subcommand (fallthrough).
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Say more: every file written and a summary, also when the output is not a terminal");
  app.add_flag("-q,--quiet", quiet, "Print nothing but errors (no progress, no summary)");
  app.fallthrough();
  app.footer("Exit status: 0 success, 1 a check failed (shape, gen --check, init over existing files), "
             "2 bad input or usage, 3 internal error. See docs/cli.md.");

  cli::CheckOptions check_opts;
  auto* check = app.add_subcommand("check", "Load and validate spec files, check every model (also those no build uses) and build, print one line per node");
  check->add_option("specs", check_opts.specs, "Spec files (YAML)")->required()->check(CLI::ExistingFile);
  check->add_flag("--warnings-as-errors", check_opts.warnings_as_errors, "Treat every warning as an error (exit 2)");
  check->footer("Exit status: 0 every spec is valid, 2 bad input (each error at file:line:col) or usage, 3 internal error.");

  cli::ShapeOptions shape_opts;
  auto* shape = app.add_subcommand("shape", "Check one Subscript DSL line against concrete input shapes");
  shape->add_option("subscript", shape_opts.dsl, "The DSL line, e.g. \"A[~ i j] B[~ j k] C[~ i k] -> C[~ i k]\"")->required();
  shape->add_option("--arg", shape_opts.args, "Constructor argument NAME=VALUE (VALUE: 3 or 10,10,10)");
  shape->add_option("--in", shape_opts.inputs, "An input shape, in order: 10x3 or 10,3 (symbolic dims: batch,784)");
  shape->add_flag("--json", shape_opts.json, "Print one JSON object instead of text");
  shape->footer("Exit status: 0 when the shapes check, 1 on a shape error, 2 on a parse or usage error.");

  cli::GenOptions gen_opts;
  auto* gen = app.add_subcommand("gen", "Generate C++ kernels (one function per node, device, dtype and rank) into a directory");
  gen->add_option("specs", gen_opts.specs, "Spec files (YAML); the standard library is always loaded")->check(CLI::ExistingFile);
  gen->add_option("-o,--output", gen_opts.output, "Output directory")->required();
  gen->add_flag("--stdlib", gen_opts.stdlib, "Also generate every kernel of the standard library");
  gen->add_option("--node", gen_opts.nodes, "Generate only the kernels of this node (repeatable)");
  gen->add_option("--namespace", gen_opts.ns, "C++ namespace of the generated code")->check([](const std::string& ns) {
    return subscript::is_name(ns) && ns.find('-') == std::string::npos ? std::string() : std::string("not a C++ identifier: ") + ns;
  });
  gen->add_option("--build", gen_opts.builds, "Generate only this build (repeatable)");
  const std::string pass_list = [] {
    std::string out;
    for (const auto& name : passes::kPassNames) out += (out.empty() ? "" : ", ") + name;
    return out;
  }();
  gen->add_option("--dump-after", gen_opts.dump_after, "Print the graph after this pass (repeatable): " + pass_list)
      ->check([pass_list](const std::string& name) {
        const auto& known = passes::kPassNames;
        return std::find(known.begin(), known.end(), name) != known.end()
                   ? std::string()
                   : "'" + name + "' is not a pass; expected one of " + pass_list;
      });
  gen->add_flag("--time-passes", gen_opts.time_passes, "Print how long each pass took");
  gen->add_flag("--list-outputs", gen_opts.list_outputs, "Print the files it would write and write nothing (for CMake)");
  gen->add_flag("--check", gen_opts.check,
                "Write nothing; compare the output directory with what would be generated, print a diff, exit 1 when they differ");
  gen->add_option("--depfile", gen_opts.depfile,
                  "Also write a Makefile-style depfile (the specs and C++ kernel files read) for the build system");
  gen->add_option("--dtype", gen_opts.dtypes, "Generate the selected impls' kernels of this dtype only (repeatable; builds still get theirs)");
  gen->add_option("--rank", gen_opts.ranks, "Generate the selected impls' kernels of this rank only (repeatable; builds still get theirs)")
      ->check(CLI::Range(1, 8));
  gen->add_option("--device", gen_opts.devices, "Generate the selected impls' kernels of this device only (repeatable; builds still get theirs)");
  gen->add_flag("--warnings-as-errors", gen_opts.warnings_as_errors, "Treat every warning as an error: write nothing, exit 2");
  gen->add_flag("--no-fuse", gen_opts.no_fuse, "Apply no paths and no automatic fusion (every build as with `fuse: false`)");
  gen->add_option("-j,--jobs", gen_opts.jobs, "Threads generating the builds and kernel files (default 1); the output is the same for any N")
      ->check(CLI::PositiveNumber);
  gen->footer("Exit status: 0 success, 1 --check found differences, 2 bad input or usage, 3 internal error.");

#ifdef WFGEN_WITH_ONNX
  cli::ImportOptions import_opts;
  auto* import = app.add_subcommand("import", "Import an ONNX model: write a spec (one model and its build) and a parameter file of its initializers");
  import->add_option("model", import_opts.model, "The .onnx file")->required()->check(CLI::ExistingFile);
  import->add_option("-o,--output", import_opts.output, "The spec to write (YAML)");
  import->add_flag("--list-operators", import_opts.list_operators, "Print the operator types of the graph and write nothing");
  import->add_option("--params", import_opts.params, "The parameter file to write (default: the spec's name with .wfparams)");
  import->add_option("--name", import_opts.name, "The model and build name (default: the spec's file name, without .yaml)");
  import->add_option("--dim", import_opts.dims, "Fix a dynamic dim: NAME=SIZE (repeatable)");
  import->add_option("--freeze-inputs", import_opts.freeze_dir,
                     "A folder of sample inputs (input_<k>.pb, ONNX's test layout): inputs that must be constants (int64 shapes, axes, "
                     "Clip bounds) or are not FLOAT take these values")->check(CLI::ExistingDirectory);
  import->add_option("--max-data", import_opts.max_data,
                     "The limit of the model's tensor data together (initializers, constants, external data) and of the file's "
                     "size, e.g. 8GiB (default 4GiB): past it, an error before the memory is taken");  import->footer("Exit status: 0 success, 2 an operator or attribute wfgen cannot import (nothing written) or bad usage.");
#endif

  cli::InitOptions init_opts;
  auto* init = app.add_subcommand("init", "Write a minimal working project (model.yaml, CMakeLists.txt, main.cpp) into a directory");
  init->add_option("dir", init_opts.dir, "The project directory (created if needed; existing files are never overwritten)")->required();
  init->add_option("--name", init_opts.name, "Project name, a C++ identifier (default: from the directory name)");
  init->footer("Exit status: 0 success, 1 a file exists already (nothing written), 2 bad usage.");

  cli::DisasmOptions disasm_opts;
  auto* disasm = app.add_subcommand("disasm", "Print a build's instruction sequence (as disassemble-waffe2-ir) offline, with symbolic shapes");
  disasm->add_option("specs", disasm_opts.specs, "Spec files (YAML)")->required()->check(CLI::ExistingFile);
  disasm->add_option("--build", disasm_opts.build, "The build to show (needed when the specs have several)");
  disasm->add_flag("--no-fuse", disasm_opts.no_fuse, "Show the build without paths and automatic fusion");
  disasm->footer("Exit status: 0 success, 2 bad input or usage, 3 internal error.");

  cli::ExplainOptions explain_opts;
  auto* explain = app.add_subcommand("explain", "Show which paths fired and what was fused in a build, with the disassembly before and after");
  explain->add_option("specs", explain_opts.specs, "Spec files (YAML)")->required()->check(CLI::ExistingFile);
  explain->add_option("--build", explain_opts.build, "The build to explain (needed when the specs have several)");
  explain->footer("Exit status: 0 success, 2 bad input or usage, 3 internal error.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : cli::kBadInput;
  }
  cli::Streams io{std::cout, std::cerr, stderr_wants_color()};
  try {
    if (*check) return cli::check(check_opts, io);
    if (*shape) return cli::shape(shape_opts, io);
    if (*disasm) return cli::disasm(disasm_opts, io);
    if (*explain) return cli::explain(explain_opts, io);
    if (*gen) {
      gen_opts.progress = stderr_wants_color();
      gen_opts.verbose = verbose;
      gen_opts.quiet = quiet;
      return cli::gen(gen_opts, io);
    }
#ifdef WFGEN_WITH_ONNX
    if (*import) {
      import_opts.quiet = quiet;
      if (import_opts.output.empty() && !import_opts.list_operators) {
        std::cerr << "error: import: -o,--output is required\n";
        return cli::kBadInput;
      }
      return cli::import_onnx(import_opts, io);
    }
#endif
    if (*init) {
      init_opts.quiet = quiet;
      return cli::init(init_opts, io);
    }
  } catch (const InternalError& e) {
    std::cerr << e.what() << "\n";
    return cli::kInternal;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "; this is a bug in wfgen, please report it\n";
    return cli::kInternal;
  }
  return cli::kBadInput;
}
