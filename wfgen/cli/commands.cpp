#include "wfgen/cli/commands.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <ostream>
#include <optional>
#include <set>
#include <tuple>
#include <sstream>

#include "wfgen/emit/emit_kernels.hpp"
#include "wfgen/emit/emit_model.hpp"
#include "wfgen/passes/passes.hpp"
#include "wfgen/trace/trace.hpp"
#include "wfgen/emit/write_outputs.hpp"
#include "wfgen/lower/kernel_plan.hpp"
#include "wfgen/shape/shape.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/subscript/subscript.hpp"
#include "wfgen/support/diagnostics.hpp"
#include "wfgen/support/parallel.hpp"

namespace wfgen::cli {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

bool same_place(const Diagnostic& a, const Diagnostic& b) {
  return a.loc.file == b.loc.file && a.loc.line == b.loc.line && a.loc.col == b.loc.col && a.message == b.message;
}

}  // namespace

std::size_t print_warnings(std::vector<Diagnostic> ws, bool as_errors, Streams io) {
  std::stable_sort(ws.begin(), ws.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.loc.file, a.loc.line, a.loc.col, a.message) < std::tie(b.loc.file, b.loc.line, b.loc.col, b.message);
  });
  ws.erase(std::unique(ws.begin(), ws.end(), same_place), ws.end());
  for (auto d : ws) {
    if (as_errors) {
      d.severity = Diagnostic::Severity::Error;
      auto at = d.message.rfind(" [-W");
      if (at != std::string::npos) d.message.insert(at + 3, "Werror,-");
    }
    io.err << render(d, io.color);
  }
  return ws.size();
}

namespace {

// The warnings of the user's nodes and models (not those of the standard library).
std::vector<Diagnostic> model_warnings(const spec::Spec& s) {
  std::vector<Diagnostic> out;
  for (const auto& n : s.nodes) {
    if (n.from_stdlib || n.fused) continue;
    auto w = trace::lint_node(s, n);
    out.insert(out.end(), w.begin(), w.end());
  }
  for (const auto& m : s.models) {
    if (m.from_stdlib) continue;
    auto w = trace::lint_model(s, m);
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

int report_user_error(const UserError& e, Streams io) {
  io.err << e.render(io.color);
  std::size_t n = 0;  // notes are not errors
  for (const auto& d : e.diagnostics()) n += d.severity == Diagnostic::Severity::Error ? 1 : 0;
  io.err << n << " error" << (n == 1 ? "" : "s") << " generated.\n";
  return kBadInput;
}

}  // namespace

std::filesystem::path stable_spec_path(const std::filesystem::path& spec) {
  namespace fs = std::filesystem;
  if (!spec.is_absolute()) return spec.lexically_normal();
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  if (ec) return spec;
  fs::path rel = spec.lexically_normal().lexically_relative(cwd);
  return rel.empty() ? spec : rel;
}

namespace {

// Whether a planned kernel passes the --dtype/--rank/--device filters.
bool selected_by_filters(const GenOptions& o, const lower::KernelPlan& p) {
  auto has = [](const auto& list, const auto& v) { return list.empty() || std::find(list.begin(), list.end(), v) != list.end(); };
  return has(o.dtypes, std::string(rt::dtype_name(p.dtype))) && has(o.ranks, p.rank) && has(o.devices, p.impl->device);
}

int gen_loaded(const GenOptions& o, const std::vector<std::filesystem::path>& specs, Streams io);

// Diagnostics with the spec paths as the user gave them (`given`) instead
// of the stable paths wfgen loaded (`loaded`), also for files in the
// specs' folders (C++ kernel files).
std::vector<Diagnostic> diagnostics_as_given(std::vector<Diagnostic> diags, const std::vector<std::filesystem::path>& loaded,
                                             const std::vector<std::filesystem::path>& given) {
  for (auto& d : diags) {
    for (std::size_t i = 0; i < loaded.size() && i < given.size(); ++i) {
      const std::string l = loaded[i].string(), dir = loaded[i].parent_path().string();
      if (d.loc.file == l) {
        d.loc.file = given[i].string();
        break;
      }
      if (!dir.empty() && d.loc.file.rfind(dir + "/", 0) == 0) {
        d.loc.file = (given[i].parent_path() / d.loc.file.substr(dir.size() + 1)).string();
        break;
      }
    }
  }
  return diags;
}

}  // namespace

int gen(const GenOptions& o, Streams io) {
  {
    for (const auto& d : o.dtypes) {
      bool known = false;
      std::vector<std::string> names;
      for (int t = 0; t < rt::kDTypeCount; ++t) {
        names.push_back(rt::dtype_name(static_cast<rt::DType>(t)));
        known |= names.back() == d;
      }
      if (!known) {
        io.err << "error: --dtype '" << quote(d) << "' is not a dtype" << did_you_mean(d, names) << "\n";
        return kBadInput;
      }
    }
    // Generated files name the spec they come from: record a path that does
    // not depend on where the checkout lives (see stable_spec_path).
    std::vector<std::filesystem::path> specs;
    for (const auto& p : o.specs) specs.push_back(stable_spec_path(p));
    try {
      return gen_loaded(o, specs, io);
    } catch (const UserError& e) {
      // Errors name the files as the user gave them.
      return report_user_error(UserError(diagnostics_as_given(e.diagnostics(), specs, o.specs)), io);
    }
  }
}

namespace {

// --node: every name a node of the specs (else the error, and false).
bool check_nodes_given(const GenOptions& o, const spec::Spec& s, Streams io) {
  for (const auto& n : o.nodes) {
    if (!s.find_node(n)) {
      std::vector<std::string> names;
      for (const auto& node : s.nodes) names.push_back(node.name);
      io.err << "error: --node " << quote(n) << " is not a node of the specs" << did_you_mean(n, names) << "\n";
      return false;
    }
  }
  return true;
}

// What the chosen builds give gen: their model files, the kernels they call
// and their warnings.
struct BuiltModels {
  std::vector<emit::OutputFile> files;
  std::vector<lower::KernelRequest> needed;
  std::vector<Diagnostic> warnings;
};

// Builds: trace, run the passes, and ask for the kernels they call. The
// builds are independent (o.jobs threads); their results are taken in
// spec order, and up to the first error only, as a sequential run would.
BuiltModels build_models(const GenOptions& o, const spec::Spec& s, passes::FusionRegistry& fusion,
                         const emit::KernelEmitOptions& eo, Streams io) {
  std::vector<const spec::Build*> chosen;
  for (const auto& b : s.builds)
    if (o.builds.empty() || std::find(o.builds.begin(), o.builds.end(), b.name) != o.builds.end()) chosen.push_back(&b);
  struct BuildResult {
    std::string log;  // of the passes (--dump-after, --time-passes)
    bool passes_done = false, done = false;
    graph::Graph graph;
    passes::MemoryPlan plan;
    std::vector<lower::KernelRequest> needed;
    std::vector<emit::OutputFile> files;
    std::vector<Diagnostic> warnings;
  };
  std::vector<BuildResult> results(chosen.size());
  std::exception_ptr error;
  try {
    parallel_for(chosen.size(), o.jobs, [&](std::size_t i) {
      const spec::Build& b = *chosen[i];
      BuildResult& r = results[i];
      r.graph = trace::trace_build(s, b, &r.warnings);
      passes::PipelineOptions po;
      po.dump_after = o.dump_after;
      po.time_passes = o.time_passes;
      po.fusion = o.no_fuse || !b.fuse ? nullptr : &fusion;
      po.build_index = static_cast<int>(i);
      r.plan = passes::run_pipeline(s, b, r.graph, po, &r.log);
      r.passes_done = true;
      r.needed = emit::kernels_needed(s, b, r.graph);
    });
    fusion.finalize();
    parallel_for(chosen.size(), o.jobs, [&](std::size_t i) {
      results[i].files = emit::emit_model(s, *chosen[i], results[i].graph, results[i].plan, eo);
      results[i].done = true;
    });
  } catch (...) {
    error = std::current_exception();  // the first failing build's, after the logs before it
  }
  BuiltModels out;
  for (auto& r : results) {
    if (r.passes_done) io.err << r.log;
    if (!r.passes_done || !r.done) break;
    out.needed.insert(out.needed.end(), r.needed.begin(), r.needed.end());
    out.files.insert(out.files.end(), r.files.begin(), r.files.end());
  }
  if (error) std::rethrow_exception(error);
  for (auto& r : results) out.warnings.insert(out.warnings.end(), r.warnings.begin(), r.warnings.end());
  return out;
}

// The kernels gen writes: by default the user's own impls, every dtype and
// rank, plus what the builds call; --dtype, --rank and --device narrow those
// asked for, never those a build calls. The fused kernels come last.
std::vector<lower::KernelPlan> plan_gen_kernels(const GenOptions& o, const spec::Spec& s, lower::KernelSelection sel,
                                                const std::vector<lower::KernelRequest>& needed, passes::FusionRegistry& fusion) {
  if (!o.stdlib && o.nodes.empty()) {
    sel.exact_only = true;
    sel.exact = needed;
    for (const auto& impl : s.impls) {
      if (impl.from_stdlib) continue;
      const spec::Node* node = s.find_node(impl.node);
      for (rt::DType dt : impl.dtypes) {
        for (int r : lower::default_ranks(impl, *node)) sel.exact.push_back({&impl, dt, r});
      }
    }
  }
  std::vector<lower::KernelPlan> plans = lower::plan_kernels(s, sel);
  if (!o.dtypes.empty() || !o.ranks.empty() || !o.devices.empty()) {
    std::set<std::tuple<const spec::Impl*, rt::DType, int>> called;
    for (const auto& r : needed) called.insert({r.impl, r.dtype, r.rank});
    std::erase_if(plans, [&](const lower::KernelPlan& p) {
      return !called.count({p.impl, p.dtype, p.rank}) && !selected_by_filters(o, p);
    });
  }
  for (auto& p : fusion.plans()) plans.push_back(std::move(p));
  return plans;
}

// --check: the output folder against the files, a diff and a list of what differs.
int check_generated(const GenOptions& o, const std::vector<emit::OutputFile>& files, Streams io) {
  emit::CheckReport c = emit::check_outputs(o.output, files);
  if (c.ok()) {
    if (!o.quiet) io.err << "wfgen: " << files.size() << " files in " << o.output.string() << " are up to date\n";
    return kOk;
  }
  io.out << c.diff;
  auto list = [&](const std::vector<std::string>& paths, const char* what) {
    for (const auto& p : paths) io.err << "wfgen: " << (o.output / p).string() << ": " << what << "\n";
  };
  list(c.differ, "differs from the generated file");
  list(c.missing, "missing (would be generated)");
  list(c.stale, "stale (not generated any more)");
  io.err << "error: " << (c.differ.size() + c.missing.size() + c.stale.size()) << " of the files in "
         << o.output.string() << " do not match what wfgen generates now; rerun `wfgen gen` without --check\n";
  return kFailed;
}

// Writes the files, with the progress line or the list of files and the
// summary when asked (-v, or a terminal).
void write_generated(const GenOptions& o, const std::vector<emit::OutputFile>& files, std::size_t kernels,
                     std::chrono::steady_clock::time_point start, Streams io) {
  const bool show_files = !o.quiet && (o.progress || o.verbose);
  std::size_t count = 0;
  auto progress = [&](const std::string& path) {
    ++count;
    if (!show_files) return;
    if (o.progress) io.err << "\r[" << count << "] wrote " << path << "\x1b[K" << std::flush;
    else io.err << "wrote " << (o.output / path).string() << "\n";
  };
  emit::WriteReport r = emit::write_outputs(o.output, files, progress);
  if (show_files && o.progress && count) io.err << "\n";
  if (show_files) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.2fs, %.0f kernels/s", secs, secs > 0 ? static_cast<double>(kernels) / secs : 0.0);
    io.err << "wfgen: " << kernels << " kernels in " << files.size() << " files (" << r.written.size() << " written, "
           << r.unchanged.size() << " unchanged, " << r.removed.size() << " removed) in " << o.output.string() << " ("
           << rate << ")\n";
  }
}

// The spec files and the C++ kernel files they name, absolute: the depfile
// is read by the build system, never committed.
void write_gen_depfile(const GenOptions& o, const spec::Spec& s, const std::vector<std::filesystem::path>& specs) {
  std::vector<std::filesystem::path> deps;
  for (const auto& p : specs) deps.push_back(std::filesystem::absolute(p));
  for (const auto& impl : s.impls)
    if (!impl.from_stdlib && !impl.cpp_file.empty()) deps.push_back(std::filesystem::absolute(impl.cpp_file));
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  emit::write_depfile(o.depfile, std::filesystem::absolute(emit::manifest_path(o.output)), deps);
}

int gen_loaded(const GenOptions& o, const std::vector<std::filesystem::path>& specs, Streams io) {
  const auto start = std::chrono::steady_clock::now();
  spec::Spec s = spec::load_with_stdlib(specs);
  passes::validate_paths(s);
  lower::KernelSelection sel;
  sel.include_stdlib = o.stdlib;
  if (!o.nodes.empty()) {
    sel.all = false;
    sel.nodes = o.nodes;
    if (!check_nodes_given(o, s, io)) return kBadInput;
  }
  emit::KernelEmitOptions eo;
  eo.ns = o.ns;
  eo.jobs = o.jobs;
  // Fused kernels, shared by the builds (equal bodies generated once); they
  // are named in spec order once every build has been fused.
  passes::FusionRegistry fusion(s);
  BuiltModels built = build_models(o, s, fusion, eo, io);
  {
    std::vector<Diagnostic> warnings = model_warnings(s);
    warnings.insert(warnings.end(), built.warnings.begin(), built.warnings.end());
    const std::size_t n = print_warnings(diagnostics_as_given(warnings, specs, o.specs), o.warnings_as_errors, io);
    if (n && o.warnings_as_errors) {
      io.err << n << " error" << (n == 1 ? "" : "s") << " generated.\n";
      return kBadInput;
    }
  }
  std::vector<lower::KernelPlan> plans = plan_gen_kernels(o, s, sel, built.needed, fusion);
  std::vector<emit::OutputFile> files = emit::emit_kernels(plans, eo);
  files.insert(files.end(), built.files.begin(), built.files.end());
  if (o.list_outputs) {
    for (const auto& f : files) io.out << (o.output / f.path).string() << "\n";
    return kOk;
  }
  if (o.check) return check_generated(o, files, io);
  write_generated(o, files, plans.size(), start, io);
  if (!o.depfile.empty()) write_gen_depfile(o, s, specs);
  return kOk;
}

}  // namespace

namespace {

// The build `name` names, or the only build when `name` is empty; nullptr
// (after saying why on io.err) when there is none.
const spec::Build* choose_build(const spec::Spec& s, const std::string& name, Streams io) {
  std::vector<std::string> names;
  for (const auto& b : s.builds)
    if (!b.name.empty()) names.push_back(b.name);
  if (name.empty()) {
    if (names.size() == 1) return &s.builds.front();
    io.err << "error: the specs have " << names.size() << " builds; choose one with --build"
           << (names.empty() ? std::string() : " (" + [&] {
                std::string j;
                for (const auto& n : names) j += (j.empty() ? "" : ", ") + n;
                return j;
              }() + ")") << "\n";
    return nullptr;
  }
  const spec::Build* build = s.find_build(name);
  if (!build) io.err << "error: no build named '" << quote(name) << "'" << did_you_mean(name, names) << "\n";
  return build;
}

// The build traced and run through the passes, with or without paths and
// fusion (the graph points into `fusion`, which must outlive it).
graph::Graph planned(const spec::Spec& s, const spec::Build& build, passes::FusionRegistry& fusion, bool fuse,
                     std::string* rewrites) {
  graph::Graph g = trace::trace_build(s, build);
  passes::PipelineOptions po;
  po.fusion = fuse && build.fuse ? &fusion : nullptr;
  po.rewrites = rewrites;
  passes::run_pipeline(s, build, g, po, nullptr);
  fusion.finalize();
  return g;
}

int count_instructions(const std::string& disassembly) {
  int n = 0;
  for (std::size_t at = disassembly.find("<WfInst"); at != std::string::npos; at = disassembly.find("<WfInst", at + 1)) ++n;
  return n;
}

}  // namespace

int disasm(const DisasmOptions& o, Streams io) {
  try {
    spec::Spec s = spec::load_with_stdlib(o.specs);
    passes::validate_paths(s);
    const spec::Build* build = choose_build(s, o.build, io);
    if (!build) return kBadInput;
    passes::FusionRegistry fusion(s);
    io.out << emit::disassemble(planned(s, *build, fusion, !o.no_fuse, nullptr));
    return kOk;
  } catch (const UserError& e) {
    return report_user_error(e, io);
  }
}

int explain(const ExplainOptions& o, Streams io) {
  try {
    spec::Spec s = spec::load_with_stdlib(o.specs);
    passes::validate_paths(s);
    const spec::Build* build = choose_build(s, o.build, io);
    if (!build) return kBadInput;
    std::string rewrites;
    passes::FusionRegistry fusion(s);
    const std::string before = emit::disassemble(planned(s, *build, fusion, false, nullptr));
    const std::string after = emit::disassemble(planned(s, *build, fusion, true, &rewrites));
    io.out << "build '" << build->name << "' (model '" << build->model << "', " << build->loc.str() << ")\n";
    if (!build->fuse) io.out << "fuse: false: no path is applied and nothing is fused\n";
    else if (rewrites.empty()) io.out << "no path matched and nothing was fused\n";
    else io.out << "\n" << rewrites;
    io.out << "\n--- before (fuse: false): " << count_instructions(before) << " instructions\n" << before;
    io.out << "\n--- after: " << count_instructions(after) << " instructions\n" << after;
    return kOk;
  } catch (const UserError& e) {
    return report_user_error(e, io);
  }
}

int check(const CheckOptions& options, Streams io) {
  try {
    // The specs with the standard library, which their models and builds may
    // call; a spec of nodes only that clashes with it is checked by itself.
    // An error of the specs by themselves is reported as such.
    std::optional<spec::Spec> plain;
    std::optional<UserError> plain_error;
    try {
      plain = spec::load(options.specs);
    } catch (const UserError& e) {
      plain_error = e;
    }
    spec::Spec full;
    try {
      full = spec::load_with_stdlib(options.specs);
    } catch (const UserError& e) {
      if (plain_error) throw *plain_error;
      if (!plain->models.empty() || !plain->builds.empty()) throw;
      full = *plain;
    }
    passes::validate_paths(full);
    const std::vector<std::string> stdlib = spec::stdlib_files();
    spec::Spec s;  // the user's part, for the listing
    for (const auto& f : full.files)
      if (std::find(stdlib.begin(), stdlib.end(), f) == stdlib.end()) s.files.push_back(f);
    for (const auto& n : full.nodes)
      if (!n.from_stdlib) s.nodes.push_back(n);
    for (const auto& i : full.impls)
      if (!i.from_stdlib) s.impls.push_back(i);
    for (const auto& m : full.models)
      if (!m.from_stdlib) s.models.push_back(m);
    s.builds = full.builds;
    // Every model of the user's by itself, also those no build uses: names and
    // calls resolved, then traced symbolically over its own where line.
    std::vector<Diagnostic> notes, warnings = model_warnings(full);
    // One report per error: met again through a call (a build of a model
    // that calls a wrong one), it is the same error, reported once, with the
    // longer chain of calls as its notes.
    std::vector<std::vector<Diagnostic>> errors;
    auto add_error = [&errors](const UserError& e) {
      const std::vector<Diagnostic>& ds = e.diagnostics();
      auto same = [&ds](const std::vector<Diagnostic>& g) {
        return !g.empty() && !ds.empty() && g[0].loc.str() == ds[0].loc.str() && g[0].message == ds[0].message;
      };
      auto it = std::find_if(errors.begin(), errors.end(), same);
      if (it == errors.end()) errors.push_back(ds);
      else if (ds.size() > it->size()) *it = ds;
    };
    std::set<std::string> failed, built;
    for (const auto& b : full.builds) built.insert(b.model);
    for (const auto& m : full.models) {
      if (m.from_stdlib) continue;
      try {
        trace::resolve_model(full, m);
        // A model a build uses is traced below with the build's values.
        if (built.count(m.name)) continue;
        std::vector<Diagnostic> n = trace::check_model(full, m);
        notes.insert(notes.end(), n.begin(), n.end());
      } catch (const UserError& e) {
        add_error(e);
        failed.insert(m.name);
      }
    }
    // Every build, traced as `wfgen gen` traces it (not again for a model found wrong above).
    for (const auto& b : full.builds) {
      if (failed.count(b.model)) continue;
      try {
        trace::trace_build(full, b, &warnings);
      } catch (const UserError& e) {
        add_error(e);
      }
    }
    const std::size_t n_warnings = print_warnings(warnings, options.warnings_as_errors, io);
    for (const auto& d : notes) io.err << render(d, io.color);  // what could not be decided
    if (!errors.empty()) {
      std::vector<Diagnostic> all;
      for (const auto& g : errors) all.insert(all.end(), g.begin(), g.end());
      return report_user_error(UserError(all), io);
    }
    if (n_warnings && options.warnings_as_errors) {
      io.err << n_warnings << " error" << (n_warnings == 1 ? "" : "s") << " generated.\n";
      return kBadInput;
    }
    for (const auto& n : s.nodes) {
      io.out << "node " << n.name << ": " << n.where.str() << "  (" << n.loc.str() << ")\n";
    }
    for (const auto& m : s.models) {
      io.out << "model " << m.name << ": " << (m.where ? m.where->str() : "(no where line)") << "  (" << m.loc.str() << ")\n";
    }
    for (const auto& b : s.builds) io.out << "build " << b.name << ": model " << b.model << "  (" << b.loc.str() << ")\n";
    auto count = [](std::size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
    io.out << "ok: " << count(s.files.size(), "file") << ", " << count(s.nodes.size(), "node") << ", "
           << count(s.impls.size(), "impl") << ", " << count(s.models.size(), "model") << ", " << count(s.builds.size(), "build")
           << (warnings.empty() ? "" : ", " + count(n_warnings, "warning")) << "\n";
    return kOk;
  } catch (const UserError& e) {
    return report_user_error(e, io);
  }
}

namespace {

// A usage or parse error of `wfgen shape`: text for humans, or JSON.
int shape_fail(const ShapeOptions& o, Streams io, int code, const std::string& kind, const std::string& message) {
  if (o.json) {
    io.out << "{\"ok\": false, \"kind\": " << json_string(kind) << ", \"message\": " << json_string(message) << "}\n";
  } else {
    io.err << message;
    if (!message.empty() && message.back() != '\n') io.err << "\n";
  }
  return code;
}

std::string dim_json(const shape::Dim& d) { return d.is_known() ? std::to_string(d.value()) : json_string(d.str()); }

}  // namespace

int shape(const ShapeOptions& o, Streams io) {
  subscript::Declaration decl;
  try {
    decl = subscript::parse(o.dsl);
  } catch (const subscript::ParseError& e) {
    Diagnostic d;
    d.loc = SourceLoc{"<subscript>", 1, static_cast<int>(e.offset()) + 1};
    d.message = e.what();
    d.source_line = o.dsl;
    d.length = static_cast<int>(e.length());
    return shape_fail(o, io, kBadInput, "parse-error", render(d, io.color && !o.json));
  }
  shape::Args args;
  for (const auto& a : o.args) {
    auto eq = a.find('=');
    std::string name = a.substr(0, eq);
    if (eq == std::string::npos || !subscript::is_symbol(name)) {
      return shape_fail(o, io, kBadInput, "parse-error",
                        "error: --arg expects NAME=VALUE with a symbol NAME, but got '" + quote(a) + "'");
    }
    try {
      args[name] = shape::parse_value(a.substr(eq + 1));
    } catch (const std::exception& e) {
      return shape_fail(o, io, kBadInput, "parse-error", "error: --arg " + quote(a) + ": " + e.what());
    }
  }
  std::vector<shape::Shape> inputs;
  for (const auto& s : o.inputs) {
    try {
      inputs.push_back(shape::parse_shape(s));
    } catch (const std::exception& e) {
      return shape_fail(o, io, kBadInput, "parse-error", std::string("error: --in ") + quote(s) + ": " + e.what());
    }
  }
  shape::CheckResult r = shape::check(decl, args, inputs);
  if (!r.ok()) {
    std::string message = shape::render_report(decl, inputs, r);
    if (!o.json) return shape_fail(o, io, kFailed, "shape-error", message);
    // The category of the first report (what cl-waffe2 would say it is about),
    // then every report with its own.
    io.out << "{\"ok\": false, \"kind\": \"shape-error\", \"category\": "
           << json_string(shape::category_name(r.reports.front().category)) << ", \"message\": " << json_string(message)
           << ", \"reports\": [";
    for (std::size_t i = 0; i < r.reports.size(); ++i) {
      const auto& rep = r.reports[i];
      io.out << (i ? ", " : "") << "{\"category\": " << json_string(shape::category_name(rep.category))
             << ", \"symbol\": " << json_string(rep.symbol) << ", \"text\": " << json_string(rep.text) << "}";
    }
    io.out << "]}\n";
    return kFailed;
  }
  if (o.json) {
    io.out << "{\"ok\": true, \"outputs\": [";
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
      const auto& out = r.outputs[i];
      io.out << (i ? ", " : "") << "{\"name\": " << (out.name ? json_string(*out.name) : "null") << ", \"shape\": [";
      for (std::size_t k = 0; k < out.shape.size(); ++k) io.out << (k ? ", " : "") << dim_json(out.shape[k]);
      io.out << "], \"inplace_of\": " << (out.inplace_of ? std::to_string(*out.inplace_of) : "null") << "}";
    }
    io.out << "]}\n";
    return kOk;
  }
  for (std::size_t i = 0; i < r.outputs.size(); ++i) {
    const auto& out = r.outputs[i];
    io.out << (out.name ? *out.name : "[" + std::to_string(i) + "]") << " " << shape::shape_str(out.shape);
    if (out.inplace_of) io.out << "  (in place of input " << *out.inplace_of << ", " << decl.inputs[*out.inplace_of].str() << ")";
    io.out << "\n";
  }
  return kOk;
}

}  // namespace wfgen::cli
