// `wfgen import`: an ONNX model file -> a spec (+ a parameter file).
#include "wfgen/cli/import.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "wfgen/model_support.hpp"
#include "wfgen/onnx/onnx_import.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::cli {

namespace fs = std::filesystem;

namespace {

// "4GiB", "512MiB", "64KiB", "1G", "100000": a size in bytes; false for anything else.
bool parse_bytes(const std::string& text, std::uint64_t& out) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 18) return false;
  const std::string unit = text.substr(digits);
  int shift = -1;
  if (unit.empty()) shift = 0;
  if (unit == "K" || unit == "KiB") shift = 10;
  if (unit == "M" || unit == "MiB") shift = 20;
  if (unit == "G" || unit == "GiB") shift = 30;
  if (unit == "T" || unit == "TiB") shift = 40;
  const std::uint64_t n = std::stoull(text.substr(0, digits));
  if (shift < 0 || n > (~std::uint64_t{0} >> shift)) return false;
  out = n << shift;
  return true;
}

}  // namespace

int import_onnx(const ImportOptions& o, Streams io) {
  if (o.supported_operators) {
    io.out << onnx_import::supported_operators_tsv();
    return 0;
  }
  if (o.list_operators) {
    try {
      for (const auto& op : onnx_import::operators_of(o.model.string())) io.out << op << "\n";
      return 0;
    } catch (const UserError& e) {
      io.err << e.render(io.color) << "\n";
      return 2;
    }
  }
  onnx_import::Options opts;
  opts.name = o.name.empty() ? fs::path(o.output).stem().string() : o.name;
  opts.freeze_dir = o.freeze_dir.string();
  opts.keep_integer_inputs = o.keep_integer_inputs;
  opts.winograd = !o.no_winograd;
  if (!o.devices.empty()) {
    // Every stdlib node has a cpu kernel; blas has the matmuls only, so cpu must follow it.
    if (o.devices != std::vector<std::string>{"cpu"} && o.devices != std::vector<std::string>{"blas", "cpu"}) {
      std::string got;
      for (const auto& d : o.devices) got += (got.empty() ? "" : ",") + d;
      io.err << "error: --devices expects cpu or blas,cpu (every node has a cpu kernel, blas only the matmuls), but got '" << quote(got) << "'\n";
      return 2;
    }
    opts.devices = o.devices;
  }
  if (!o.max_data.empty() && !parse_bytes(o.max_data, opts.max_data_bytes)) {
    io.err << "error: --max-data expects a size such as 8GiB, 512MiB or a number of bytes, but got '" << quote(o.max_data) << "'\n";
    return 2;
  }
  for (const auto& d : o.dims) {
    auto eq = d.find('=');
    std::int64_t v = -1;
    if (eq != std::string::npos) {
      try {
        std::size_t used = 0;
        v = std::stoll(d.substr(eq + 1), &used);
        if (used != d.size() - eq - 1) v = -1;
      } catch (const std::exception&) {
        v = -1;
      }
    }
    if (eq == std::string::npos || eq == 0 || v < 0) {
      io.err << "error: --dim expects NAME=SIZE with a size >= 0, but got '" << d << "'\n";
      return 2;
    }
    opts.dims[d.substr(0, eq)] = v;
  }
  fs::path params = o.params;
  if (params.empty()) params = fs::path(o.output).replace_extension(".wfparams");
  opts.params_file = params.filename().string();
  onnx_import::Imported imported;
  try {
    imported = onnx_import::import_file(o.model.string(), opts);
  } catch (const UserError& e) {
    io.err << e.render(io.color) << "\n";
    return 2;
  }
  // All or nothing: both files are written beside their targets, then renamed.
  auto write = [&](const fs::path& to, const std::string& text) {
    std::ofstream f(to, std::ios::binary);
    f << text;
    return static_cast<bool>(f);
  };
  fs::path spec_tmp = fs::path(o.output).concat(".tmp"), params_tmp = fs::path(params).concat(".tmp");
  bool ok = write(spec_tmp, imported.spec);
  if (ok && !imported.params.empty()) {
    rt::Status st = rt::try_save_parameters(params_tmp.string(), imported.param_names, imported.params);
    if (!st.ok()) {
      io.err << "error: " << st.message() << "\n";
      ok = false;
    }
  }
  std::error_code ec;
  if (ok) {
    fs::rename(spec_tmp, o.output, ec);
    if (!ec && !imported.params.empty()) fs::rename(params_tmp, params, ec);
  }
  if (!ok || ec) {
    fs::remove(spec_tmp, ec);
    fs::remove(params_tmp, ec);
    io.err << "error: cannot write " << o.output.string() << (imported.params.empty() ? "" : " and " + params.string()) << "\n";
    return 2;
  }
  if (!o.quiet) {
    io.out << "wrote " << o.output.string();
    if (!imported.params.empty()) io.out << " and " << params.string() << " (" << imported.params.size() << " initializers)";
    io.out << " from " << o.model.string() << " (opset " << imported.opset << ")\n";
  }
  return 0;
}

}  // namespace wfgen::cli
