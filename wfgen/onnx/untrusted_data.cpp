// Making an untrusted ONNX model harmless before the importer reads it, the
// second half: sizes checked before memory is taken, and external data read
// from the model's folder only (untrusted.hpp).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "wfgen/onnx/untrusted.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::onnx_import {

namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

[[noreturn]] void fail_at(const std::string& path, const std::string& message) {
  Diagnostic d;
  d.loc.file = path;
  d.message = message;
  throw UserError(d);
}

std::string bytes_text(std::uint64_t n) {
  std::string s = std::to_string(n) + " bytes";
  if (n >= (1ull << 30)) s += " (" + std::to_string(n >> 30) + " GiB)";
  else if (n >= (1ull << 20)) s += " (" + std::to_string(n >> 20) + " MiB)";
  return s;
}

// Bytes per element of an ONNX element type; 0 for STRING and for the
// numbers ONNX does not define.
std::uint64_t element_size(int type) {
  switch (type) {
    case TensorProto::BOOL: case TensorProto::INT8: case TensorProto::UINT8: return 1;
    case TensorProto::INT16: case TensorProto::UINT16: case TensorProto::FLOAT16: case TensorProto::BFLOAT16: return 2;
    case TensorProto::FLOAT: case TensorProto::INT32: case TensorProto::UINT32: return 4;
    case TensorProto::DOUBLE: case TensorProto::INT64: case TensorProto::UINT64: case TensorProto::COMPLEX64: return 8;
    case TensorProto::COMPLEX128: return 16;
    default: return 0;
  }
}

// The typed field ONNX keeps an element type's values in, and how many
// entries of it one element takes.
struct TypedField {
  const char* name;
  int per_element;
};

TypedField typed_field(int type) {
  switch (type) {
    case TensorProto::FLOAT: return {"float_data", 1};
    case TensorProto::COMPLEX64: return {"float_data", 2};
    case TensorProto::DOUBLE: return {"double_data", 1};
    case TensorProto::COMPLEX128: return {"double_data", 2};
    case TensorProto::INT64: return {"int64_data", 1};
    case TensorProto::UINT32: case TensorProto::UINT64: return {"uint64_data", 1};
    case TensorProto::STRING: return {"string_data", 1};
    default: return {"int32_data", 1};
  }
}

std::uint64_t field_size(const TensorProto& t, const std::string& field) {
  if (field == "float_data") return static_cast<std::uint64_t>(t.float_data_size());
  if (field == "double_data") return static_cast<std::uint64_t>(t.double_data_size());
  if (field == "int64_data") return static_cast<std::uint64_t>(t.int64_data_size());
  if (field == "uint64_data") return static_cast<std::uint64_t>(t.uint64_data_size());
  if (field == "string_data") return static_cast<std::uint64_t>(t.string_data_size());
  return static_cast<std::uint64_t>(t.int32_data_size());
}

std::string dims_text(const TensorProto& t) {
  std::string s = "[";
  for (int k = 0; k < t.dims_size(); ++k) s += (k ? ", " : "") + std::to_string(t.dims(k));
  return s + "]";
}

// A whole decimal number >= 0 (an external data offset or length).
bool parse_size(const std::string& s, std::uint64_t& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

// Is `inner` (canonical) inside the folder `dir` (canonical)?
bool inside(const fs::path& dir, const fs::path& inner) {
  auto [d, i] = std::mismatch(dir.begin(), dir.end(), inner.begin(), inner.end());
  return d == dir.end() && i != inner.end();
}

std::string read_limited(const std::string& path, std::uint64_t max_bytes, const char* what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail_at(path, "cannot read " + path + ": not a regular file");
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec) fail_at(path, "cannot read " + path + ": " + ec.message());
  if (size > static_cast<std::uint64_t>(INT_MAX)) {
    fail_at(path, std::string(what) + " is " + bytes_text(size) +
                      "; protobuf reads at most 2 GiB, larger models keep their tensors in external data");
  }
  if (size > max_bytes) {
    fail_at(path, std::string(what) + " is " + bytes_text(size) + ", over the limit of " + bytes_text(max_bytes) +
                      " (--max-data raises it)");
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) fail_at(path, "cannot read " + path);
  return bytes;
}

bool parse_limited(const std::string& bytes, google::protobuf::MessageLite& message) {
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(static_cast<int>(bytes.size()));
  in.SetRecursionLimit(kMaxNesting);
  return message.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

}  // namespace

void parse_model(const std::string& bytes, const std::string& path, std::uint64_t max_bytes, onnx::ModelProto& model) {
  const auto not_onnx = [&] { fail_at(path, path + " is not an ONNX model (the protobuf ModelProto does not parse)"); };
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) not_onnx();
  const std::optional<std::uint64_t> cost = parse_cost(bytes);
  if (!cost) not_onnx();
  if (*cost > max_bytes) {
    const std::string about = *cost >= (1u << 20) ? std::to_string(*cost >> 20) + " MiB" : std::to_string(*cost >> 10) + " KiB";
    fail_at(path, "reading the model file would take about " + about +
                      " of memory (its messages, strings and arrays), over the limit of " + bytes_text(max_bytes) +
                      " (--max-data raises it)");
  }
  if (!parse_limited(bytes, model)) not_onnx();
}

void read_model_file(const std::string& path, std::uint64_t max_data_bytes, onnx::ModelProto& model) {
  parse_model(read_limited(path, max_data_bytes, "the model file"), path, max_data_bytes, model);
}

bool read_tensor_file(const std::string& path, std::uint64_t max_data_bytes, onnx::TensorProto& t) {
  return parse_limited(read_limited(path, max_data_bytes, "the tensor file"), t);
}

void TensorChecker::fail(const std::string& message) const { fail_at(path_, message); }

void TensorChecker::check_model(onnx::ModelProto& model) {
  for (auto& t : *model.mutable_graph()->mutable_initializer()) check(t, "initializer '" + t.name() + "'", true);
  for (auto& n : *model.mutable_graph()->mutable_node()) check_node(n);
}

void TensorChecker::check_node(onnx::NodeProto& node) {
  const bool constant = node.op_type() == "Constant" && (node.domain().empty() || node.domain() == "ai.onnx");
  const std::string who = "of node '" + node.name() + "' (" + node.op_type() + ")";
  for (auto& a : *node.mutable_attribute()) {
    const std::string what = "attribute '" + a.name() + "' " + who;
    if (!constant) {
      const int n = std::max({a.ints_size(), a.floats_size(), a.strings_size(), a.tensors_size(), a.graphs_size()});
      if (n > kMaxAttributeValues) {
        fail(what + " holds " + std::to_string(n) + " values; the attributes of wfgen's operators hold at most " +
             std::to_string(kMaxAttributeValues));
      }
    }
    if (a.has_t()) {
      const std::uint64_t count = element_count(a.t(), what);
      if (node.op_type() == "ConstantOfShape" && count != 1) {
        fail(what + " has dims " + dims_text(a.t()) + " (" + std::to_string(count) + " values); its value is one value");
      }
      if (!constant && count > static_cast<std::uint64_t>(kMaxAttributeValues)) {
        fail(what + " is a tensor of " + std::to_string(count) + " values; an operator's attribute tensor holds at most " +
             std::to_string(kMaxAttributeValues));
      }
      check(*a.mutable_t(), what, true);
    }
    for (auto& t : *a.mutable_tensors()) check(t, what, true);
    // A Constant's value_floats / value_ints become a tensor of that size.
    const std::uint64_t listed = static_cast<std::uint64_t>(a.floats_size()) * 4 + static_cast<std::uint64_t>(a.ints_size()) * 8;
    if (listed > max_bytes_ - std::min(total_, max_bytes_)) {
      fail(what + " brings the model's tensor data to more than the limit of " + bytes_text(max_bytes_) + " (--max-data raises it)");
    }
    total_ += listed;
  }
}

std::uint64_t TensorChecker::element_count(const onnx::TensorProto& t, const std::string& what) const {
  std::uint64_t count = 1;
  for (int k = 0; k < t.dims_size(); ++k) {
    const std::int64_t d = t.dims(k);
    if (d < 0) fail(what + " has dims " + dims_text(t) + ": dim " + std::to_string(k) + " is negative");
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count) || count > max_bytes_) {
      fail(what + " has dims " + dims_text(t) + ", more elements than the limit of " + bytes_text(max_bytes_) +
           " allows (--max-data raises it)");
    }
  }
  return count;
}

void TensorChecker::check(onnx::TensorProto& t, const std::string& what, bool external_ok) {
  const int type = t.data_type();
  if (!onnx::TensorProto::DataType_IsValid(type) || type == TensorProto::UNDEFINED) {
    fail(what + " has element type " + std::to_string(type) + ", which ONNX does not define");
  }
  const std::uint64_t count = element_count(t, what);
  std::uint64_t bytes = 0;
  if (type == TensorProto::STRING) {
    for (const auto& s : t.string_data()) bytes += s.size();
  } else if (__builtin_mul_overflow(count, element_size(type), &bytes) || bytes > max_bytes_) {
    fail(what + " has dims " + dims_text(t) + ", more elements than the limit of " + bytes_text(max_bytes_) +
         " allows (--max-data raises it)");
  }
  if (bytes > max_bytes_ - std::min(total_, max_bytes_)) {
    fail(what + " (" + bytes_text(bytes) + ") brings the model's tensor data to more than the limit of " + bytes_text(max_bytes_) +
         " (--max-data raises it)");
  }
  if (t.data_location() == TensorProto::EXTERNAL) {
    if (!external_ok) fail(what + " refers to external data, which only a model's tensors may");
    if (type == TensorProto::STRING) fail(what + " is a STRING tensor in external data, which ONNX does not allow");
    read_external(t, what, bytes);
  }
  check_present(t, what, count);
  total_ += bytes;
}

void TensorChecker::check_present(const onnx::TensorProto& t, const std::string& what, std::uint64_t count) const {
  const int type = t.data_type();
  const TypedField field = typed_field(type);
  const std::uint64_t raw = t.raw_data().size(), typed = field_size(t, field.name);
  for (const char* other : {"float_data", "double_data", "int64_data", "uint64_data", "string_data", "int32_data"}) {
    if (std::string(other) != field.name && field_size(t, other) > 0) {
      fail(what + " is " + TensorProto::DataType_Name(type) + " but holds values in " + other + " (ONNX keeps " +
           TensorProto::DataType_Name(type) + " values in " + field.name + (type == TensorProto::STRING ? "" : " or raw_data") + ")");
    }
  }
  if (raw > 0 && typed > 0) fail(what + " holds values both in raw_data and in " + field.name);
  if (raw > 0) {
    if (type == TensorProto::STRING) fail(what + " is a STRING tensor with raw_data, which ONNX does not allow");
    const std::uint64_t want = count * element_size(type);  // no overflow: checked in check()
    if (raw != want) {
      fail(what + " has dims " + dims_text(t) + " (" + std::to_string(count) + " elements of " + TensorProto::DataType_Name(type) +
           ", " + std::to_string(want) + " bytes) but its data holds " + std::to_string(raw) + " bytes");
    }
    return;
  }
  const std::uint64_t want = count * static_cast<std::uint64_t>(field.per_element);
  if (typed != want) {
    fail(what + " has dims " + dims_text(t) + " (" + std::to_string(count) + " elements) but holds " + std::to_string(typed) +
         " values");
  }
}

void TensorChecker::read_external(onnx::TensorProto& t, const std::string& what, std::uint64_t bytes) {
  std::map<std::string, std::string> entries;
  for (const auto& e : t.external_data()) {
    if (!entries.emplace(e.key(), e.value()).second) fail(what + " gives its external data's '" + escape_name(e.key()) + "' twice");
  }
  const std::string location = entries["location"];
  const std::string shown = "'" + escape_name(location) + "'";
  if (location.empty()) fail(what + " refers to external data without a location");
  if (location.find('\0') != std::string::npos) fail(what + ": the external data location " + shown + " holds a NUL byte");
  const fs::path rel(location);
  if (rel.is_absolute() || location.front() == '/') {
    fail(what + ": the external data location " + shown + " is an absolute path; it must name a file in the model's folder");
  }
  for (const auto& part : rel) {
    if (part == "..") fail(what + ": the external data location " + shown + " climbs out of the model's folder with '..'");
  }
  std::error_code ec;
  fs::path dir = fs::path(path_).parent_path();
  const fs::path folder = fs::canonical(dir.empty() ? fs::path(".") : dir, ec);
  if (ec) fail(what + " refers to external data " + shown + ", but the model's folder cannot be resolved: " + ec.message());
  const fs::path file = fs::canonical(folder / rel, ec);
  if (ec) fail(what + ": its external data file " + shown + " cannot be opened: " + ec.message());
  if (!inside(folder, file)) {
    fail(what + ": the external data location " + shown + " resolves (through a symlink) to '" + escape_name(file.string()) +
         "', outside the model's folder");
  }
  if (!fs::is_regular_file(file, ec)) fail(what + ": its external data file " + shown + " is not a regular file");
  const std::uint64_t size = fs::file_size(file, ec);
  if (ec) fail(what + ": its external data file " + shown + " cannot be read: " + ec.message());
  std::uint64_t offset = 0, length = bytes;
  if (entries.count("offset") && !parse_size(entries["offset"], offset)) {
    fail(what + ": its external data offset '" + escape_name(entries["offset"]) + "' is not a whole number >= 0");
  }
  if (entries.count("length") && !parse_size(entries["length"], length)) {
    fail(what + ": its external data length '" + escape_name(entries["length"]) + "' is not a whole number >= 0");
  }
  if (offset > size || length > size - offset) {
    fail(what + ": its external data (offset " + std::to_string(offset) + ", length " + std::to_string(length) + ") goes past the end of " +
         shown + ", which is " + std::to_string(size) + " bytes long");
  }
  if (length != bytes) {
    fail(what + " has dims " + dims_text(t) + " (" + std::to_string(bytes) + " bytes) but its external data holds " +
         std::to_string(length) + " bytes");
  }
  std::string data(static_cast<std::size_t>(length), '\0');
  std::ifstream in(file, std::ios::binary);
  if (!in.seekg(static_cast<std::streamoff>(offset)) || !in.read(data.data(), static_cast<std::streamsize>(length))) {
    fail(what + ": its external data file " + shown + " cannot be read");
  }
  t.set_raw_data(std::move(data));
  t.clear_external_data();
  t.set_data_location(TensorProto::DEFAULT);
}

}  // namespace wfgen::onnx_import
