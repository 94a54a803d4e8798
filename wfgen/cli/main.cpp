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

namespace {

using namespace wfgen;

CLI::App* add_check(CLI::App& app, cli::CheckOptions& o) {
  auto* check = app.add_subcommand("check", "Load and validate spec files, check every model (also those no build uses) and build, print one line per node");
  check->add_option("specs", o.specs, "Spec files (YAML)")->required()->check(CLI::ExistingFile);
  check->add_flag("--warnings-as-errors", o.warnings_as_errors, "Treat every warning as an error (exit 2)");
  check->footer("Exit status: 0 every spec is valid, 2 bad input (each error at file:line:col) or usage, 3 internal error.");
  return check;
}

CLI::App* add_shape(CLI::App& app, cli::ShapeOptions& o) {
  auto* shape = app.add_subcommand("shape", "Check one Subscript DSL line against concrete input shapes");
  shape->add_option("subscript", o.dsl, "The DSL line, e.g. \"A[~ i j] B[~ j k] C[~ i k] -> C[~ i k]\"")->required();
  shape->add_option("--arg", o.args, "Constructor argument NAME=VALUE (VALUE: 3 or 10,10,10)");
  shape->add_option("--in", o.inputs, "An input shape, in order: 10x3 or 10,3 (symbolic dims: batch,784)");
  shape->add_flag("--json", o.json, "Print one JSON object instead of text");
  shape->footer("Exit status: 0 when the shapes check, 1 on a shape error, 2 on a parse or usage error.");
  return shape;
}

CLI::App* add_gen(CLI::App& app, cli::GenOptions& o) {
  auto* gen = app.add_subcommand("gen", "Generate C++ kernels (one function per node, device, dtype and rank) into a directory");
  gen->add_option("specs", o.specs, "Spec files (YAML); the standard library is always loaded")->check(CLI::ExistingFile);
  gen->add_option("-o,--output", o.output, "Output directory")->required();
  gen->add_flag("--stdlib", o.stdlib, "Also generate every kernel of the standard library");
  gen->add_option("--node", o.nodes, "Generate only the kernels of this node (repeatable)");
  gen->add_option("--namespace", o.ns, "C++ namespace of the generated code")->check([](const std::string& ns) {
    return subscript::is_name(ns) && ns.find('-') == std::string::npos ? std::string() : std::string("not a C++ identifier: ") + ns;
  });
  gen->add_option("--build", o.builds, "Generate only this build (repeatable)");
  const std::string pass_list = [] {
    std::string out;
    for (const auto& name : passes::kPassNames) out += (out.empty() ? "" : ", ") + name;
    return out;
  }();
  gen->add_option("--dump-after", o.dump_after, "Print the graph after this pass (repeatable): " + pass_list)
      ->check([pass_list](const std::string& name) {
        const auto& known = passes::kPassNames;
        return std::find(known.begin(), known.end(), name) != known.end()
                   ? std::string()
                   : "'" + name + "' is not a pass; expected one of " + pass_list;
      });
  gen->add_flag("--time-passes", o.time_passes, "Print how long each pass took");
  gen->add_flag("--list-outputs", o.list_outputs, "Print the files it would write and write nothing (for CMake)");
  gen->add_flag("--check", o.check,
                "Write nothing; compare the output directory with what would be generated, print a diff, exit 1 when they differ");
  gen->add_option("--depfile", o.depfile,
                  "Also write a Makefile-style depfile (the specs and C++ kernel files read) for the build system");
  gen->add_option("--dtype", o.dtypes, "Generate the selected impls' kernels of this dtype only (repeatable; builds still get theirs)");
  gen->add_option("--rank", o.ranks, "Generate the selected impls' kernels of this rank only (repeatable; builds still get theirs)")
      ->check(CLI::Range(1, 8));
  gen->add_option("--device", o.devices, "Generate the selected impls' kernels of this device only (repeatable; builds still get theirs)");
  gen->add_flag("--warnings-as-errors", o.warnings_as_errors, "Treat every warning as an error: write nothing, exit 2");
  gen->add_flag("--no-fuse", o.no_fuse, "Apply no paths and no automatic fusion (every build as with `fuse: false`)");
  gen->add_option("-j,--jobs", o.jobs, "Threads generating the builds and kernel files (default 1); the output is the same for any N")
      ->check(CLI::PositiveNumber);
  gen->footer("Exit status: 0 success, 1 --check found differences, 2 bad input or usage, 3 internal error.");
  return gen;
}

#ifdef WFGEN_WITH_ONNX
CLI::App* add_import(CLI::App& app, cli::ImportOptions& o) {
  auto* import = app.add_subcommand("import", "Import an ONNX model: write a spec (one model and its build) and a parameter file of its initializers");
  import->add_option("model", o.model, "The .onnx file (required unless --supported-operators)")->check(CLI::ExistingFile);
  import->add_option("-o,--output", o.output, "The spec to write (YAML)");
  import->add_flag("--list-operators", o.list_operators, "Print the operator types of the graph and write nothing");
  import->add_flag("--supported-operators", o.supported_operators,
                   "Print the operators wfgen imports, one a line, tab-separated: name, opsets, attributes, dtypes, "
                   "inputs needed as constants, what it becomes");
  import->add_option("--params", o.params, "The parameter file to write (default: the spec's name with .wfparams)");
  import->add_option("--name", o.name, "The model and build name (default: the spec's file name, without .yaml)");
  import->add_option("--dim", o.dims, "Fix a dynamic dim: NAME=SIZE (repeatable)");
  import->add_option("--freeze-inputs", o.freeze_dir,
                     "A folder of sample inputs (input_<k>.pb, ONNX's test layout): inputs that must be constants (int64 shapes, axes, "
                     "Clip bounds) or are not FLOAT take these values")->check(CLI::ExistingDirectory);
  import->add_flag("--keep-integer-inputs", o.keep_integer_inputs,
                   "With --freeze-inputs: INT64, INT32 and BOOL inputs that no node needs as a constant stay inputs of their own "
                   "dtype (typed_inputs) instead of being frozen");
  import->add_option("--devices", o.devices,
                     "The build's devices, in order of preference, comma-separated: cpu (default) or blas,cpu (matmuls "
                     "through the BLAS wfgen_add_library links, everything else on cpu)")->delimiter(',');
  import->add_flag("--no-winograd", o.no_winograd,
                   "Every Conv as im2col + matmul (or depthwise_conv2d): no winograd_conv2d, whose fp32 rounding is about "
                   "1e-6 of the terms' magnitude rather than a direct sum's");
  import->add_option("--max-data", o.max_data,
                     "The limit of the model's tensor data together (initializers, constants, external data) and of the file's "
                     "size, e.g. 8GiB (default 4GiB): past it, an error before the memory is taken");
  import->footer("Exit status: 0 success, 2 an operator or attribute wfgen cannot import (nothing written) or bad usage.");
  return import;
}
#endif

CLI::App* add_init(CLI::App& app, cli::InitOptions& o) {
  auto* init = app.add_subcommand("init", "Write a minimal working project (model.yaml, CMakeLists.txt, main.cpp) into a directory");
  init->add_option("dir", o.dir, "The project directory (created if needed; existing files are never overwritten)")->required();
  init->add_option("--name", o.name, "Project name, a C++ identifier (default: from the directory name)");
  init->footer("Exit status: 0 success, 1 a file exists already (nothing written), 2 bad usage.");
  return init;
}

CLI::App* add_disasm(CLI::App& app, cli::DisasmOptions& o) {
  auto* disasm = app.add_subcommand("disasm", "Print a build's instruction sequence (as disassemble-waffe2-ir) offline, with symbolic shapes");
  disasm->add_option("specs", o.specs, "Spec files (YAML)")->required()->check(CLI::ExistingFile);
  disasm->add_option("--build", o.build, "The build to show (needed when the specs have several)");
  disasm->add_flag("--no-fuse", o.no_fuse, "Show the build without paths and automatic fusion");
  disasm->footer("Exit status: 0 success, 2 bad input or usage, 3 internal error.");
  return disasm;
}

CLI::App* add_explain(CLI::App& app, cli::ExplainOptions& o) {
  auto* explain = app.add_subcommand("explain", "Show which paths fired and what was fused in a build, with the disassembly before and after");
  explain->add_option("specs", o.specs, "Spec files (YAML)")->required()->check(CLI::ExistingFile);
  explain->add_option("--build", o.build, "The build to explain (needed when the specs have several)");
  explain->footer("Exit status: 0 success, 2 bad input or usage, 3 internal error.");
  return explain;
}

#ifdef WFGEN_WITH_ONNX
int run_import(cli::ImportOptions& o, bool quiet, cli::Streams io) {
  o.quiet = quiet;
  if (o.supported_operators) return cli::import_onnx(o, io);
  if (o.model.empty()) {
    io.err << "error: import: the model file (.onnx) is required\n";
    return cli::kBadInput;
  }
  if (o.output.empty() && !o.list_operators) {
    io.err << "error: import: -o,--output is required\n";
    return cli::kBadInput;
  }
  return cli::import_onnx(o, io);
}
#endif

}  // namespace

int main(int argc, char** argv) {
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
  cli::ShapeOptions shape_opts;
  cli::GenOptions gen_opts;
  cli::InitOptions init_opts;
  cli::DisasmOptions disasm_opts;
  cli::ExplainOptions explain_opts;
  auto* check = add_check(app, check_opts);
  auto* shape = add_shape(app, shape_opts);
  auto* gen = add_gen(app, gen_opts);
#ifdef WFGEN_WITH_ONNX
  cli::ImportOptions import_opts;
  auto* import = add_import(app, import_opts);
#endif
  auto* init = add_init(app, init_opts);
  auto* disasm = add_disasm(app, disasm_opts);
  auto* explain = add_explain(app, explain_opts);

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
    if (*import) return run_import(import_opts, quiet, io);
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
