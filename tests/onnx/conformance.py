#!/usr/bin/env python3
"""ONNX's backend node tests through wfgen: import, generate, compile, run, compare.

Each test of Debian's libonnx-testdata (data/node/<test>/model.onnx with
test_data_set_*/input_*.pb and output_*.pb) is imported with `wfgen import`,
generated with `wfgen gen`, compiled with a driver this script writes, run on
every data set, and compared with the expected outputs with ONNX's tolerance
(|got - want| <= atol + rtol |want|, rtol 1e-3, atol 1e-7; NaN equals NaN).
Many tests share one generated folder and one executable, so the whole suite
takes minutes.

Several folders of tests (--data, given again for each section of the
page; a section may list several folders, comma-separated) run together:
the markdown page gets one table per section. A folder with a file
`tolerance` ("atol rtol", as tests/onnx/export_models.py writes) is
compared with that tolerance instead of --atol and --rtol, and its section
lists each test's operators (whole models, not single nodes).

Every test ends as one of:
  pass         every output of every data set within tolerance
  fail         generated and run, but an output differs (a wfgen bug to fix)
  error        imported, but `wfgen gen`, the compiler or the run failed
  unsupported  `wfgen import` refused it (an operator, attribute or dtype),
               with its message

Usage:
  tests/onnx/conformance.py --wfgen build/wfgen/wfgen --build build [--sample N | --tests a,b]
                            [--markdown docs/onnx-conformance.md] [--work DIR] [--expect-pass N]
                            [--data DIR[,DIR...]]... [--atol 1e-7 --rtol 1e-3] [--reuse docs/onnx-conformance.md]

The page docs/onnx-conformance.md (ONNX's node tests, then the PyTorch tests):
  tests/onnx/conformance.py --wfgen build/wfgen/wfgen --build build --jobs 2 --markdown docs/onnx-conformance.md \
      --data /usr/share/libonnx-testdata/data/node \
      --data /usr/share/libonnx-testdata/data/pytorch-operator,/usr/share/libonnx-testdata/data/pytorch-converted

--reuse PAGE imports every test again but takes the result of a test that
imports from PAGE (a page this script wrote) instead of generating,
compiling and running it: the cheap way to rewrite the page after a change
that leaves every imported spec as it was (the operator table's columns,
refusal messages). Tests PAGE has no result for run as usual. Check first
that the specs are unchanged (import every model with the old and the new
wfgen and compare the files); the numbers of a real run need no --reuse.
"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/libonnx-testdata/data/node"
WHERE = {}  # test name -> the folder of tests it is in
TOLERANCE = {}  # folder -> (atol, rtol): its file `tolerance` ("atol rtol"), else --atol and --rtol
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRIVER_HEAD = r'''// Written by tests/onnx/conformance.py: runs imported ONNX node tests.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "wfgen/model_support.hpp"
#include "wfgen/runtime.hpp"
'''

DRIVER_BODY = r'''
namespace {

namespace fs = std::filesystem;
using wfgen::rt::Tensor;

std::string shape_text(const wfgen::rt::Shape& s);

bool read_proto(const std::string& path, onnx::TensorProto& t) {
  std::ifstream in(path, std::ios::binary);
  return in && t.ParseFromIstream(&in);
}

std::vector<float> floats(const onnx::TensorProto& t) {
  std::vector<float> out;
  if (t.float_data_size() > 0) {
    out.assign(t.float_data().begin(), t.float_data().end());
  } else {
    out.resize(t.raw_data().size() / 4);
    std::memcpy(out.data(), t.raw_data().data(), out.size() * 4);
  }
  return out;
}

std::vector<double> doubles(const onnx::TensorProto& t) {
  std::vector<double> out;
  if (t.double_data_size() > 0) {
    out.assign(t.double_data().begin(), t.double_data().end());
  } else {
    out.resize(t.raw_data().size() / 8);
    std::memcpy(out.data(), t.raw_data().data(), out.size() * 8);
  }
  return out;
}

bool expected_values(const onnx::TensorProto& t, std::vector<double>& out, bool& exact, std::string& why);

// FLOAT inputs as f32, DOUBLE ones (a model wfgen builds as f64) as f64.
bool to_tensor(const onnx::TensorProto& t, Tensor& out, std::string& why) {
  wfgen::rt::Shape shape(t.dims().begin(), t.dims().end());
  if (t.data_type() == onnx::TensorProto::DOUBLE) {
    out = Tensor::empty(wfgen::rt::DType::f64, shape);
    std::vector<double> v = doubles(t);
    if (static_cast<std::int64_t>(v.size()) != out.numel()) {
      why = "an input holds the wrong number of values";
      return false;
    }
    std::memcpy(out.data<double>(), v.data(), v.size() * 8);
    return true;
  }
  if (t.data_type() == onnx::TensorProto::INT64 || t.data_type() == onnx::TensorProto::INT32 ||
      t.data_type() == onnx::TensorProto::BOOL || t.data_type() == onnx::TensorProto::UINT8) {
    // A typed input (wfgen import --keep-integer-inputs): i64, i32 or u8 (UINT8, or BOOL as 0 / 1).
    std::vector<double> v;
    bool exact = false;
    if (!expected_values(t, v, exact, why)) return false;
    const wfgen::rt::DType dt = t.data_type() == onnx::TensorProto::INT64   ? wfgen::rt::DType::i64
                                : t.data_type() == onnx::TensorProto::INT32 ? wfgen::rt::DType::i32
                                                                            : wfgen::rt::DType::u8;
    out = Tensor::empty(dt, shape);
    if (static_cast<std::int64_t>(v.size()) != out.numel()) {
      why = "an input holds the wrong number of values";
      return false;
    }
    // INT64 values are read back exactly below (doubles hold only 2^53).
    if (dt == wfgen::rt::DType::i64 && !t.raw_data().empty()) {
      std::memcpy(out.data<std::int64_t>(), t.raw_data().data(), v.size() * 8);
    } else if (dt == wfgen::rt::DType::i64 && t.int64_data_size() == static_cast<int>(v.size())) {
      std::copy(t.int64_data().begin(), t.int64_data().end(), out.data<std::int64_t>());
    } else {
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (dt == wfgen::rt::DType::i32) out.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
        else if (t.data_type() == onnx::TensorProto::BOOL) out.data<std::uint8_t>()[i] = v[i] != 0 ? 1 : 0;
        else if (dt == wfgen::rt::DType::u8) out.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(v[i]);
        else out.data<std::int64_t>()[i] = static_cast<std::int64_t>(v[i]);
      }
    }
    return true;
  }
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    why = "an input is not FLOAT, DOUBLE, INT64, INT32, UINT8 or BOOL";
    return false;
  }
  out = Tensor::empty(wfgen::rt::DType::f32, shape);
  std::vector<float> v = floats(t);
  if (static_cast<std::int64_t>(v.size()) != out.numel()) {
    why = "an input holds the wrong number of values";
    return false;
  }
  std::memcpy(out.data<float>(), v.data(), v.size() * 4);
  return true;
}

// The narrow integer types: raw bytes, else int32_data (ONNX's layout).
template <class T>
bool narrow(const onnx::TensorProto& t, std::vector<double>& out) {
  const std::string& raw = t.raw_data();
  if (raw.empty()) {
    for (auto v : t.int32_data()) out.push_back(static_cast<double>(static_cast<T>(v)));
    return true;
  }
  std::vector<T> v(raw.size() / sizeof(T));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(T));
  for (T x : v) out.push_back(static_cast<double>(x));
  return true;
}

// UINT32 and UINT64: raw bytes, else uint64_data.
template <class T>
bool wide_unsigned(const onnx::TensorProto& t, std::vector<double>& out) {
  const std::string& raw = t.raw_data();
  if (raw.empty()) {
    for (auto v : t.uint64_data()) out.push_back(static_cast<double>(static_cast<T>(v)));
    return true;
  }
  std::vector<T> v(raw.size() / sizeof(T));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(T));
  for (T x : v) out.push_back(static_cast<double>(x));
  return true;
}

// The values of an expected output as doubles: FLOAT or DOUBLE, or the BOOL and
// integer outputs a wfgen model returns as f32 whole numbers (compared exactly).
bool expected_values(const onnx::TensorProto& t, std::vector<double>& out, bool& exact, std::string& why) {
  out.clear();
  exact = t.data_type() != onnx::TensorProto::FLOAT && t.data_type() != onnx::TensorProto::DOUBLE;
  const std::string& raw = t.raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      for (float v : floats(t)) out.push_back(v);
      return true;
    case onnx::TensorProto::DOUBLE:
      out = doubles(t);
      return true;
    case onnx::TensorProto::BOOL:
      if (!raw.empty()) for (char c : raw) out.push_back(c != 0 ? 1.0 : 0.0);
      else for (auto v : t.int32_data()) out.push_back(v != 0 ? 1.0 : 0.0);
      return true;
    case onnx::TensorProto::INT32:
      if (!raw.empty()) {
        std::vector<std::int32_t> v(raw.size() / 4);
        std::memcpy(v.data(), raw.data(), v.size() * 4);
        out.assign(v.begin(), v.end());
      } else {
        out.assign(t.int32_data().begin(), t.int32_data().end());
      }
      return true;
    case onnx::TensorProto::INT64:
      if (!raw.empty()) {
        std::vector<std::int64_t> v(raw.size() / 8);
        std::memcpy(v.data(), raw.data(), v.size() * 8);
        for (auto x : v) out.push_back(static_cast<double>(x));
      } else {
        for (auto x : t.int64_data()) out.push_back(static_cast<double>(x));
      }
      return true;
    case onnx::TensorProto::INT16: return narrow<std::int16_t>(t, out);
    case onnx::TensorProto::INT8: return narrow<std::int8_t>(t, out);
    case onnx::TensorProto::UINT16: return narrow<std::uint16_t>(t, out);
    case onnx::TensorProto::UINT8: return narrow<std::uint8_t>(t, out);
    case onnx::TensorProto::UINT32: return wide_unsigned<std::uint32_t>(t, out);
    case onnx::TensorProto::UINT64: return wide_unsigned<std::uint64_t>(t, out);
    default:
      why = "an expected output of type " + onnx::TensorProto::DataType_Name(t.data_type());
      return false;
  }
}

// ONNX's np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7) (or
// the folder's tolerance); BOOL
// and integer outputs exactly.
bool close(const Tensor& got, const onnx::TensorProto& want, double atol, double rtol, std::string& why) {
  wfgen::rt::Shape shape(want.dims().begin(), want.dims().end());
  if (got.shape() != shape) {
    why = "shape " + shape_text(got.shape()) + ", expected " + shape_text(shape);
    return false;
  }
  std::vector<double> w;
  bool exact = false;
  if (!expected_values(want, w, exact, why)) return false;
  if (static_cast<std::int64_t>(w.size()) != got.numel()) {
    why = std::to_string(w.size()) + " expected values for " + std::to_string(got.numel()) + " elements";
    return false;
  }
  Tensor c = got.contiguous();
  // Outputs of any dtype: i64, i32 and u8 (BOOL) ones are whole numbers, compared exactly.
  auto element = [&c](std::size_t i) -> double {
    switch (c.dtype()) {
      case wfgen::rt::DType::f64: return c.data<double>()[i];
      case wfgen::rt::DType::i64: return static_cast<double>(c.data<std::int64_t>()[i]);
      case wfgen::rt::DType::i32: return c.data<std::int32_t>()[i];
      case wfgen::rt::DType::u8: return c.data<std::uint8_t>()[i];
      default: return c.data<float>()[i];
    }
  };
  for (std::size_t i = 0; i < w.size(); ++i) {
    double a = element(i), b = w[i];
    if (exact) {
      if (a == b) continue;
    } else if (std::isnan(a) && std::isnan(b)) {
      continue;
    } else if (std::isinf(a) || std::isinf(b)) {
      if (a == b) continue;
    } else if (std::fabs(a - b) <= atol + rtol * std::fabs(b)) {
      continue;
    }
    why = "element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " + std::to_string(b);
    return false;
  }
  return true;
}

std::string shape_text(const wfgen::rt::Shape& s) {
  std::string out = "(";
  for (std::size_t k = 0; k < s.size(); ++k) out += (k ? " " : "") + std::to_string(s[k]);
  return out + ")";
}

std::vector<std::string> sorted_glob(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && e.path().extension() == ".pb") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return out;
}

// A runner takes the data set's inputs it uses; `why[k]` is non-empty when
// input k could not be read (a runner that uses it reports that reason).
using Runner = wfgen::rt::Status (*)(const std::vector<Tensor>& in, const std::vector<std::string>& why,
                                     std::vector<Tensor>& out);
struct Case {
  const char* name;
  const char* dir;  // the folder of tests it is in
  double atol, rtol;
  Runner run;
};

void run_case(const Case& c) {
  fs::path dir = fs::path(c.dir) / c.name;
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    std::printf("error %s: no test_data_set_*\n", c.name);
    return;
  }
  for (const auto& set : sets) {
    // Inputs frozen into the spec by `wfgen import --freeze-inputs` may be
    // of any dtype: only the runner knows which inputs it takes.
    std::vector<Tensor> inputs;
    std::vector<std::string> unread;
    std::string why;
    for (const auto& p : sorted_glob(set, "input_")) {
      onnx::TensorProto t;
      Tensor x;
      why.clear();
      if (!read_proto(p, t)) why = "does not parse";
      else if (!to_tensor(t, x, why) && why.empty()) why = "cannot be read";
      unread.push_back(why.empty() ? "" : p + ": " + why);
      inputs.push_back(std::move(x));
    }
    std::vector<Tensor> outputs;
    wfgen::rt::Status st = c.run(inputs, unread, outputs);
    if (!st.ok()) {
      std::string m = st.message();
      std::replace(m.begin(), m.end(), '\n', ' ');
      std::printf("error %s: the generated model failed: %s\n", c.name, m.c_str());
      return;
    }
    std::vector<std::string> wants = sorted_glob(set, "output_");
    if (wants.size() != outputs.size()) {
      std::printf("fail %s: %zu outputs, expected %zu\n", c.name, outputs.size(), wants.size());
      return;
    }
    for (std::size_t k = 0; k < wants.size(); ++k) {
      onnx::TensorProto t;
      if (!read_proto(wants[k], t)) {
        std::printf("error %s: %s does not parse\n", c.name, wants[k].c_str());
        return;
      }
      if (!close(outputs[k], t, c.atol, c.rtol, why)) {
        std::printf("fail %s: %s, output %zu: %s\n", c.name, set.filename().c_str(), k, why.c_str());
        return;
      }
    }
  }
  std::printf("pass %s\n", c.name);
}
'''

DRIVER_MAIN = r'''
}  // namespace

int main() {
  for (const auto& c : kCases) run_case(c);
  return 0;
}
'''


def kernel_headers():
    """The headers every generated kernel file includes, as the CMake package
    lists them for its precompiled header (WFGEN_KERNEL_HEADERS)."""
    with open(os.path.join(ROOT, "cmake", "wfgenAddLibrary.cmake")) as f:
        m = re.search(r"set\(WFGEN_KERNEL_HEADERS(.*?)CACHE", f.read(), re.S)
    return re.findall(r"<([^>]+)>", m.group(1)) if m else []


# A model file's tables (kTensors, kProgram, ...) are in an anonymous
# namespace under the same names in every model file: --unity renames those
# of each file it includes (#define) so that several model files compile as
# one translation unit.
ANON_BLOCK = re.compile(r"^namespace \{\n(.*?)^\}  // namespace\n", re.S | re.M)
ANON_DECL = re.compile(r"^  (?!using\b)[^\n=;(]*?\b(k[A-Z]\w*)\s*(?:\[\]\s*)?(?:=|\{)", re.M)


def local_names(path):
    with open(path) as f:
        text = f.read()
    return sorted({n for block in ANON_BLOCK.findall(text) for n in ANON_DECL.findall(block)})


def unity_units(gen, sources, size):
    """[(file to compile, [generated files it holds])]: `size` model files
    (those with a header) or kernel files to a translation unit. At -O0 a
    model file's compile is mostly the runtime's inline and template
    functions it uses, emitted again in every object: batched, each is
    emitted once a unit (measured on the sample's first 80 models, 2 s of
    CPU a model file alone, 0.35 s in a unit of 10)."""
    if size <= 1:
        return [(s, [s]) for s in sources]
    models = [s for s in sources if os.path.exists(s[:-4] + ".hpp")]
    kernels = [s for s in sources if s not in models]
    units = []
    for kind, files in (("models", models), ("kernels", kernels)):
        for i in range(0, len(files), size):
            unit = os.path.join(gen, "unity_%s_%d.cxx" % (kind, i // size))
            with open(unit, "w") as f:
                for s in files[i : i + size]:
                    names = local_names(s) if kind == "models" else []
                    tag = re.sub(r"\W", "_", os.path.basename(s)[:-4])
                    f.writelines("#define %s %s_%s\n" % (n, n, tag) for n in names)
                    f.write('#include "%s"\n' % os.path.basename(s))
                    f.writelines("#undef %s\n" % n for n in names)
            units.append((unit, files[i : i + size]))
    return units


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def first_line(text):
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line
    return ""


KEEP_INTEGER_INPUTS = False  # --keep-integer-inputs


def import_test(wfgen, work, name):
    """Imports one test; returns (spec path or None, message, number of inputs, has params)."""
    model = os.path.join(WHERE[name], name, "model.onnx")
    spec = os.path.join(work, "specs", name + ".yaml")
    params = os.path.join(work, "specs", name + ".wfparams")
    # Inputs the model needs as constants (shapes, axes, Clip's bounds) or
    # that are not FLOAT are frozen to the first data set's values.
    sample = os.path.join(WHERE[name], name, "test_data_set_0")
    cmd = [wfgen, "-q", "import", model, "-o", spec, "--params", params, "--name", name, "--freeze-inputs", sample]
    r = run(cmd + (["--keep-integer-inputs"] if KEEP_INTEGER_INPUTS else []))
    if r.returncode != 0:
        msg = first_line(r.stderr)
        msg = msg.replace(model + ": error: ", "")
        return None, msg, [], False
    text = open(spec).read()
    where = re.search(r'where: "(.*) ->', text)
    n_inputs = len(re.findall(r"[\w.]+\[", where.group(1))) if where else 0
    frozen = sorted(int(k) for k in re.findall(r"^# input '.*' \(input (\d+)\) frozen from", text, re.M))
    used, k = [], 0
    while len(used) < n_inputs:
        if k not in frozen:
            used.append(k)
        k += 1
    return spec, "", used, os.path.exists(params)


def operators(wfgen, name):
    r = run([wfgen, "import", os.path.join(WHERE[name], name, "model.onnx"), "--list-operators"])
    return r.stdout.split() if r.returncode == 0 else []


def operator_table(wfgen):
    """wfgen's operator table (`wfgen import --supported-operators`): name ->
    dict of its tab-separated columns (opsets, attributes, dtypes, constant
    inputs, doc)."""
    r = run([wfgen, "import", "--supported-operators"])
    if r.returncode != 0:
        sys.exit("conformance: wfgen import --supported-operators failed: " + first_line(r.stderr))
    lines = r.stdout.splitlines()
    header = lines[0].lstrip("# ").split("\t")
    table = {}
    for line in lines[1:]:
        cols = line.split("\t")
        if len(cols) != len(header):
            sys.exit("conformance: a line of wfgen import --supported-operators has %d columns, not %d: %s"
                     % (len(cols), len(header), line))
        table[cols[0]] = dict(zip(header[1:], cols[1:]))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wfgen", required=True)
    ap.add_argument("--build", required=True, help="wfgen's build folder (for the runtime library)")
    ap.add_argument("--sample", type=int, default=0, help="every k-th test of the sorted list, k chosen for N tests")
    ap.add_argument("--tests", default="", help="comma-separated test names")
    ap.add_argument("--markdown", default="", help="write the conformance table here")
    ap.add_argument("--work", default="")
    ap.add_argument("--batch", type=int, default=80)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--unity", type=int, default=10,
                    help="generated files to a compiled translation unit (1: each alone; a unit that fails compiles "
                    "its files alone, for the error)")
    ap.add_argument("--expect-pass", type=int, default=-1, help="exit 1 unless at least this many pass")
    ap.add_argument("--reuse", default="", help="take the results of tests that import from this page (see above)")
    ap.add_argument("--data", action="append", default=[],
                    help="a section of tests: folders of tests, comma-separated (default: the node tests; also "
                    "/usr/share/libonnx-testdata/data/pytorch-converted, pytorch-operator, simple); again for another section")
    ap.add_argument("--atol", type=float, default=1e-7, help="|got - want| <= atol + rtol |want| (ONNX's: 1e-7)")
    ap.add_argument("--rtol", type=float, default=1e-3, help="(ONNX's: 1e-3)")
    ap.add_argument("--keep-integer-inputs", action="store_true",
                    help="INT64, INT32 and BOOL inputs stay inputs of the model (typed_inputs), fed at run time, "
                    "instead of being frozen to the first data set's values")
    args = ap.parse_args()
    global KEEP_INTEGER_INPUTS
    KEEP_INTEGER_INPUTS = args.keep_integer_inputs

    wfgen = os.path.abspath(args.wfgen)
    sections = []  # (folders, test names)
    for spec in args.data or [DATA]:
        roots = [os.path.abspath(d) for d in spec.split(",") if d]
        found = []
        for root in roots:
            TOLERANCE[root] = (args.atol, args.rtol)
            if os.path.exists(os.path.join(root, "tolerance")):
                with open(os.path.join(root, "tolerance")) as f:
                    TOLERANCE[root] = tuple(float(v) for v in f.read().split()[:2])
            for p in sorted(glob.glob(os.path.join(root, "test_*"))):
                n = os.path.basename(p)
                if n in WHERE:
                    sys.exit("conformance: test %s is in both %s and %s" % (n, WHERE[n], root))
                WHERE[n] = root
                found.append(n)
        sections.append((roots, found))
    names = sorted(WHERE)
    if args.tests:
        names = [n for n in args.tests.split(",") if n]
        for n in names:
            if n not in WHERE:
                sys.exit("conformance: no test %s in %s" % (n, ", ".join(r for roots, _ in sections for r in roots)))
    elif args.sample:
        step = max(1, len(names) // args.sample)
        names = names[::step][: args.sample]
    work = args.work or tempfile.mkdtemp(prefix="wfgen-onnx-")
    os.makedirs(os.path.join(work, "specs"), exist_ok=True)
    runtime = glob.glob(os.path.join(args.build, "runtime", "libwfgen_runtime.a"))
    if not runtime:
        sys.exit("conformance: no runtime/libwfgen_runtime.a in " + args.build)

    clock = {"import": 0.0, "generate": 0.0, "compile": 0.0, "run": 0.0}  # seconds of each phase

    def timed(phase, f, *a, **kw):
        t = time.monotonic()
        try:
            return f(*a, **kw)
        finally:
            clock[phase] += time.monotonic() - t

    result = {}  # name -> (status, message)
    imported = []  # (name, spec, positions of the data set's inputs it takes, has_params)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        imports = timed("import", lambda: list(pool.map(lambda n: import_test(wfgen, work, n), names)))
        for name, (spec, msg, n_in, has_params) in zip(names, imports):
            if spec is None:
                result[name] = ("unsupported", msg)
            else:
                imported.append((name, spec, n_in, has_params))

    if args.reuse:
        previous = results_of_page(args.reuse)
        kept = []
        for item in imported:
            if previous.get(item[0], ("unsupported", ""))[0] in ("pass", "fail", "error"):
                result[item[0]] = previous[item[0]]
            else:
                kept.append(item)
        print("conformance: %d results taken from %s, %d tests to run" % (len(imported) - len(kept), args.reuse, len(kept)))
        imported = kept

    # A spec that `wfgen gen` rejects fails its whole batch: only then is
    # each spec of that batch generated alone, to find which (a `wfgen gen`
    # of every test, before, for a case that rarely comes).
    def gen_alone(item):
        name, spec = item[0], item[1]
        out = os.path.join(work, "alone", name)
        r = run([wfgen, "-q", "gen", spec, "-o", out, "--namespace", "onnx_conf"])
        shutil.rmtree(out, ignore_errors=True)
        return r

    def gen_batch(batch, gen):
        """Generates `batch` into `gen`; returns the items generated (the
        others get their result "error")."""
        shutil.rmtree(gen, ignore_errors=True)
        r = run([wfgen, "-q", "gen"] + [s for _, s, _, _ in batch] + ["-o", gen, "--namespace", "onnx_conf"])
        if r.returncode == 0:
            return batch
        good = []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for item, ra in zip(batch, pool.map(gen_alone, batch)):
                if ra.returncode != 0:
                    result[item[0]] = ("error", "wfgen gen: " + first_line(ra.stderr))
                else:
                    good.append(item)
        if len(good) == len(batch):  # each alone is fine, together not
            for name, *_ in batch:
                result[name] = ("error", "wfgen gen (batch): " + first_line(r.stderr))
            return []
        return gen_batch(good, gen) if good else []

    cxx = os.environ.get("CXX", "c++")
    launcher = [shutil.which("ccache")] if shutil.which("ccache") else []
    flags = ["-std=c++20", "-O0", "-w", "-DONNX_NAMESPACE=onnx", "-DONNX_ML=1",
             "-I" + os.path.join(ROOT, "runtime", "include")]
    # The headers every generated file starts with, precompiled once: they
    # are half of a kernel file's compile time (the build's wfgen libraries
    # do the same, cmake/wfgenAddLibrary.cmake). ccache caches the compiles
    # that use it only with this sloppiness.
    env = dict(os.environ, CCACHE_SLOPPINESS="pch_defines,time_macros")
    pch = os.path.join(work, "pch", "wfgen_kernel_headers.hpp")
    os.makedirs(os.path.dirname(pch), exist_ok=True)
    with open(pch, "w") as f:
        f.write("".join("#include <%s>\n" % h for h in kernel_headers()))
    r = run([cxx] + flags + ["-x", "c++-header", pch, "-o", pch + ".gch"])
    if r.returncode == 0:
        flags += ["-include", pch]
    else:
        print("conformance: no precompiled header (%s)" % first_line(r.stderr), file=sys.stderr)
    for b in range(0, len(imported), args.batch):
        gen = os.path.join(work, "gen%d" % (b // args.batch))
        batch = timed("generate", gen_batch, imported[b : b + args.batch], gen)
        if not batch:
            continue
        driver = os.path.join(gen, "conformance_driver.cpp")
        runners = []
        for name, spec, used, has_params in batch:
            n_in = max(used) + 1 if used else 0
            ins = ", ".join("in[%d]" % k for k in used)
            check = ""
            if used:
                check = ("  for (int k : {%s})\n"
                         "    if (!why[k].empty()) return wfgen::rt::Status(wfgen::rt::ErrorCode::InvalidArgument, why[k]);\n"
                         % ", ".join(str(k) for k in used))
            load = ""
            if has_params:
                load = ('  if (wfgen::rt::Status s = m.try_load_parameters("%s"); !s.ok()) return s;\n'
                        % os.path.join(work, "specs", name + ".wfparams"))
            runners.append(
                "wfgen::rt::Status run_%s(const std::vector<Tensor>& in, const std::vector<std::string>& why,\n"
                "                         std::vector<Tensor>& out) {\n"
                "  if (in.size() < %d) return wfgen::rt::Status(wfgen::rt::ErrorCode::InvalidArgument, "
                "\"expected %d inputs\");\n"
                "%s"
                "  onnx_conf::%s m;\n%s  return m.try_forward(out%s);\n}\n"
                % (name, n_in, n_in, check, name, load, (", " + ins) if ins else ""))
        table = "const Case kCases[] = {\n" + "".join(
            '    {"%s", "%s", %r, %r, run_%s},\n' % ((n, WHERE[n]) + TOLERANCE[WHERE[n]] + (n,)) for n, *_ in batch) + "};\n"
        with open(driver, "w") as f:
            f.write(DRIVER_HEAD)
            for name, *_ in batch:
                f.write('#include "%s.hpp"\n' % name)
            f.write(DRIVER_BODY + "\n" + "".join(runners) + table + DRIVER_MAIN)
        sources = sorted(s for s in glob.glob(os.path.join(gen, "*.cpp")) if s != driver)
        # The driver (ONNX's protobuf headers, the longest compile) first: no core idles at the end.
        units = [(driver, [driver])] + unity_units(gen, sources, args.unity)
        objects = []

        def compile_one(src):
            obj = os.path.splitext(src)[0] + ".o"
            return obj, run(launcher + [cxx] + flags + ["-I" + gen, "-c", src, "-o", obj], env=env)

        def compile_unit(unit):
            obj, rr = compile_one(unit[0])
            if rr.returncode == 0 or len(unit[1]) == 1:
                return [(obj, rr)]
            print("conformance: %s does not compile, its files alone: %s" % (unit[0], first_line(rr.stderr)), file=sys.stderr)
            return [compile_one(s) for s in unit[1]]
        failed = None
        t_compile = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for compiled in pool.map(compile_unit, units):
                for obj, rr in compiled:
                    objects.append(obj)
                    if rr.returncode != 0 and failed is None:
                        failed = (obj, rr.stderr)
        exe = os.path.join(gen, "conformance")
        if failed is None:
            rr = run([cxx] + objects + [runtime[0], "-lonnx_proto", "-lprotobuf", "-lpthread", "-o", exe])
            if rr.returncode != 0:
                failed = (exe, rr.stderr)
        clock["compile"] += time.monotonic() - t_compile
        if failed is not None:
            for name, *_ in batch:
                result[name] = ("error", "compiling %s: %s" % (os.path.basename(failed[0]), first_line(failed[1])))
            continue
        rr = timed("run", run, [exe], timeout=600)
        seen = set()
        for line in rr.stdout.splitlines():
            m = re.match(r"(pass|fail|error) (\w+)(?:: (.*))?$", line)
            if m:
                result[m.group(2)] = (m.group(1), m.group(3) or "")
                seen.add(m.group(2))
        for name, *_ in batch:
            if name not in seen:
                result[name] = ("error", "the driver stopped (exit %d) before this test: %s" % (rr.returncode, first_line(rr.stderr)))

    counts = {k: 0 for k in ("pass", "fail", "error", "unsupported")}
    for status, _ in result.values():
        counts[status] += 1
    total = len(result)
    print("onnx conformance: %d tests: %d pass, %d fail, %d error, %d unsupported"
          % (total, counts["pass"], counts["fail"], counts["error"], counts["unsupported"]))
    print("onnx conformance: %s (wall seconds)" % ", ".join("%s %.0f" % kv for kv in clock.items()))
    for name in sorted(result):
        status, msg = result[name]
        if status in ("fail", "error"):
            print("  %s %s: %s" % (status, name, msg))

    if args.markdown:
        write_markdown(args.markdown, wfgen, result, sections, args)
    if counts["fail"]:
        print("conformance: FAILED: %d wrong answers" % counts["fail"], file=sys.stderr)
        return 1
    if args.expect_pass >= 0 and counts["pass"] < args.expect_pass:
        print("conformance: FAILED: %d pass, expected at least %d" % (counts["pass"], args.expect_pass), file=sys.stderr)
        return 1
    return 0


def results_of_page(path):
    """name -> (status, message) of the "Every test" table of a page write_markdown wrote."""
    out = {}
    with open(path) as f:
        text = f.read()
    # The "Every test" tables of the node sections (one row a test, three columns).
    for line in text.splitlines():
        m = re.match(r"\| (test_\w+) \| (pass|fail|error|unsupported) \| ((?:[^|]|\\\|)*) \|$", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3).replace("\\|", "|"))
    return out


def section_title(roots):
    """`node` is ONNX's backend node tests; other folders by their names."""
    names = [os.path.basename(r) for r in roots]
    if names == ["node"]:
        return "ONNX's backend node tests"
    if any(os.path.exists(os.path.join(r, "tolerance")) for r in roots):
        return "Models exported from PyTorch (tests/onnx/export_models.py)"
    return "The tests of " + " and ".join("`%s`" % n for n in names)


def write_markdown(path, wfgen, result, sections, args):
    ops_of = {name: operators(wfgen, name) for name in result}
    known = set(op for ops in ops_of.values() for op in ops)
    table = operator_table(wfgen)

    def main_op(name):
        compact = name[len("test_"):].replace("_", "").lower()
        best = ""
        for op in known:
            if compact.startswith(op.lower()) and len(op) > len(best):
                best = op
        return best or (ops_of[name][0] if ops_of[name] else "?")
    with open(path, "w") as f:
        f.write("# ONNX conformance\n\n")
        f.write("Backend tests of Debian's `libonnx-testdata` through `wfgen import`, `wfgen gen`, the C++ compiler and "
                "a run on every data set, compared with ONNX's tolerance (|got - want| <= %g + %g |want|). Written by "
                "`tests/onnx/conformance.py` (its docstring gives the command; docs/onnx.md).\n\n" % (args.atol, args.rtol))
        f.write("*fail* is a wrong answer (a bug to fix first); *error*: imported but not generated, compiled or run; "
                "*unsupported*: `wfgen import` refused the model, with the reason below.\n\n")
        first = True
        for roots, names in sections:
            names = [n for n in names if n in result]
            if not names:
                continue
            c = {k: sum(1 for n in names if result[n][0] == k) for k in ("pass", "fail", "error", "unsupported")}
            f.write("## %s\n\n" % section_title(roots))
            f.write("%s.\n\n" % ", ".join("`%s`" % r for r in roots))
            f.write("**%d tests: %d pass, %d fail, %d error, %d unsupported.**\n\n"
                    % (len(names), c["pass"], c["fail"], c["error"], c["unsupported"]))
            if any(os.path.exists(os.path.join(r, "tolerance")) for r in roots):
                # Whole models: each with its operators and tolerance.
                atol, rtol = TOLERANCE[roots[0]]
                f.write("Compared with |got - want| <= %g + %g |want|.\n\n" % (atol, rtol))
                f.write("| model | result | operators | reason |\n| --- | --- | --- | --- |\n")
                for name in sorted(names):
                    status, msg = result[name]
                    f.write("| %s | %s | %s | %s |\n" % (name, status, ", ".join(sorted(ops_of[name])), msg.replace("|", "\\|")))
                f.write("\n")
                continue
            per_op = {}
            for name in names:
                status, msg = result[name]
                per_op.setdefault(main_op(name), []).append((name, status, msg))
            # The first section lists every operator wfgen imports as well.
            ops = sorted(set(per_op) | set(table)) if first else sorted(per_op)
            if first:
                f.write("Every operator of the tests and every operator wfgen imports (its table, "
                        "`wfgen import --supported-operators`): *opsets* are those wfgen imports it in "
                        "(\"-\": not imported), *becomes* what it is in the body.\n\n")
            first = False
            f.write("| operator | opsets | tests | pass | fail | error | unsupported | becomes |\n"
                    "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
            for op in ops:
                rows = per_op.get(op, [])
                k = {st: sum(1 for _, s_, _ in rows if s_ == st) for st in ("pass", "fail", "error", "unsupported")}
                row = table.get(op, {})
                f.write("| %s | %s | %d | %d | %d | %d | %d | %s |\n"
                        % (op, row.get("opsets", "-"), len(rows), k["pass"], k["fail"], k["error"], k["unsupported"],
                           row.get("doc", "").replace("|", "\\|")))
            f.write("\n### Every test of %s\n\n| test | result | reason |\n| --- | --- | --- |\n" % section_title(roots))
            for name in sorted(names):
                status, msg = result[name]
                f.write("| %s | %s | %s |\n" % (name, status, msg.replace("|", "\\|")))
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
