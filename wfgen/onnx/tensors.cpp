#include "wfgen/onnx/tensors.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace wfgen::onnx_import {

std::int64_t element_count(const onnx::TensorProto& t) {
  std::int64_t n = 1;
  for (auto d : t.dims()) n *= d;
  return n;
}

namespace {

// Values stored either in the typed repeated field or little-endian in raw_data.
template <typename Raw, typename Field>
void read(const onnx::TensorProto& t, const Field& field, std::vector<double>& out) {
  if (field.size() > 0) {
    for (auto v : field) out.push_back(static_cast<double>(static_cast<Raw>(v)));
    return;
  }
  const std::string& raw = t.raw_data();
  const std::size_t n = raw.size() / sizeof(Raw);
  for (std::size_t k = 0; k < n; ++k) {
    Raw v;
    std::memcpy(&v, raw.data() + k * sizeof(Raw), sizeof(Raw));
    out.push_back(static_cast<double>(v));
  }
}

}  // namespace

bool numbers_of(const onnx::TensorProto& t, std::vector<double>& out) {
  out.clear();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: read<float>(t, t.float_data(), out); return true;
    case onnx::TensorProto::DOUBLE: read<double>(t, t.double_data(), out); return true;
    case onnx::TensorProto::INT64: read<std::int64_t>(t, t.int64_data(), out); return true;
    case onnx::TensorProto::UINT64: read<std::uint64_t>(t, t.uint64_data(), out); return true;
    // The narrower integer types and BOOL live in int32_data (or raw_data at their own width).
    case onnx::TensorProto::INT32: read<std::int32_t>(t, t.int32_data(), out); return true;
    case onnx::TensorProto::UINT32: read<std::uint32_t>(t, t.uint64_data(), out); return true;
    case onnx::TensorProto::INT16: read<std::int16_t>(t, t.int32_data(), out); return true;
    case onnx::TensorProto::UINT16: read<std::uint16_t>(t, t.int32_data(), out); return true;
    case onnx::TensorProto::INT8: read<std::int8_t>(t, t.int32_data(), out); return true;
    case onnx::TensorProto::UINT8: read<std::uint8_t>(t, t.int32_data(), out); return true;
    case onnx::TensorProto::BOOL: read<std::uint8_t>(t, t.int32_data(), out); return true;
    default: return false;
  }
}

std::vector<std::int64_t> ints_of(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::INT64 && t.data_type() != onnx::TensorProto::INT32) return {};
  std::vector<double> v;
  numbers_of(t, v);
  std::vector<std::int64_t> out;
  // INT64 values above 2^53 do not survive a double: read them directly.
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (t.int64_data_size() > 0) return {t.int64_data().begin(), t.int64_data().end()};
    out.resize(t.raw_data().size() / 8);
    // memcpy from an empty vector's null data() is undefined, even of 0 bytes.
    if (!out.empty()) std::memcpy(out.data(), t.raw_data().data(), out.size() * 8);
    return out;
  }
  for (double x : v) out.push_back(static_cast<std::int64_t>(x));
  return out;
}

std::vector<float> floats_of(const onnx::TensorProto& t) {
  // Directly, not through numbers_of's doubles: initializers can be large.
  if (t.data_type() != onnx::TensorProto::FLOAT) return {};
  if (t.float_data_size() > 0) return {t.float_data().begin(), t.float_data().end()};
  std::vector<float> out(t.raw_data().size() / sizeof(float));
  // An empty tensor (Resize's absent scales): no memcpy from a null data().
  if (!out.empty()) std::memcpy(out.data(), t.raw_data().data(), out.size() * sizeof(float));
  return out;
}

std::unique_ptr<onnx::TensorProto> constant_of(const onnx::NodeProto& node, std::string& why) {
  if (node.attribute_size() != 1) {
    why = "a Constant has exactly one value attribute, this one has " + std::to_string(node.attribute_size());
    return nullptr;
  }
  const onnx::AttributeProto& a = node.attribute(0);
  auto t = std::make_unique<onnx::TensorProto>();
  if (a.name() == "value") {
    *t = a.t();
  } else if (a.name() == "value_float") {
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(a.f());
  } else if (a.name() == "value_floats") {
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(a.floats_size());
    for (float f : a.floats()) t->add_float_data(f);
  } else if (a.name() == "value_int") {
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(a.i());
  } else if (a.name() == "value_ints") {
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(a.ints_size());
    for (auto i : a.ints()) t->add_int64_data(i);
  } else {
    why = "its attribute '" + a.name() + "' is not supported (value, value_float(s) and value_int(s) are)";
    return nullptr;
  }
  t->set_name(node.output(0));
  return t;
}

namespace {

// The values of a narrow integer type, and of the unsigned 64-bit types up
// to 2^53 (doubles hold every integer up to there).
std::pair<double, double> integer_range(int type) {
  switch (type) {
    case onnx::TensorProto::INT8: return {-128.0, 127.0};
    case onnx::TensorProto::INT16: return {-32768.0, 32767.0};
    case onnx::TensorProto::UINT8: return {0.0, 255.0};
    case onnx::TensorProto::UINT16: return {0.0, 65535.0};
    case onnx::TensorProto::UINT32: return {0.0, 4294967295.0};
    default: return {0.0, 9007199254740992.0};
  }
}

}  // namespace

std::unique_ptr<onnx::TensorProto> cast_constant(const onnx::TensorProto& t, int to, std::string& why) {
  std::vector<double> v;
  if (!numbers_of(t, v)) {
    why = "a Cast from " + onnx::TensorProto::DataType_Name(t.data_type());
    return nullptr;
  }
  auto out = std::make_unique<onnx::TensorProto>();
  out->mutable_dims()->CopyFrom(t.dims());
  out->set_data_type(to);
  for (double x : v) {
    const double whole = std::trunc(x);
    switch (to) {
      case onnx::TensorProto::FLOAT: out->add_float_data(static_cast<float>(x)); break;
      case onnx::TensorProto::DOUBLE: out->add_double_data(x); break;
      case onnx::TensorProto::INT64:
        if (!(std::fabs(whole) < 9.2e18)) {
          why = "a Cast of " + std::to_string(x) + " to INT64";
          return nullptr;
        }
        out->add_int64_data(static_cast<std::int64_t>(whole));
        break;
      case onnx::TensorProto::INT32:
        if (!(std::fabs(whole) < 2.1e9)) {
          why = "a Cast of " + std::to_string(x) + " to INT32";
          return nullptr;
        }
        out->add_int32_data(static_cast<std::int32_t>(whole));
        break;
      case onnx::TensorProto::BOOL: out->add_int32_data(x != 0 ? 1 : 0); break;
      case onnx::TensorProto::INT8:
      case onnx::TensorProto::INT16:
      case onnx::TensorProto::UINT8:
      case onnx::TensorProto::UINT16:
      case onnx::TensorProto::UINT32:
      case onnx::TensorProto::UINT64: {
        // The narrow types hold what is in their range; wrapping is left
        // out (a value outside is refused), and so are 64-bit values beyond
        // 2^53, which the double the folds compute in does not hold exactly.
        const auto [lo, hi] = integer_range(to);
        if (!(whole >= lo && whole <= hi)) {
          why = "a Cast of " + std::to_string(x) + " to " + onnx::TensorProto::DataType_Name(to) + " (outside its range)";
          return nullptr;
        }
        if (to == onnx::TensorProto::UINT32 || to == onnx::TensorProto::UINT64) out->add_uint64_data(static_cast<std::uint64_t>(whole));
        else out->add_int32_data(static_cast<std::int32_t>(whole));
        break;
      }
      default:
        why = "a Cast to " + onnx::TensorProto::DataType_Name(to);
        return nullptr;
    }
  }
  return out;
}

}  // namespace wfgen::onnx_import
