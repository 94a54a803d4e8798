// Tensor::to_string: the cl-waffe2 print layout (and shape_to_string, the
// "(3 4)" of every runtime message)
//
//   {CPUTENSOR[float] :shape (10 10)
//     ((1.0 1.0 1.0 ~ 1.0 1.0 1.0)
//      (1.0 1.0 1.0 ~ 1.0 1.0 1.0)
//      ...
//      (1.0 1.0 1.0 ~ 1.0 1.0 1.0))
//     :storage :owned}
//
// Axes longer than 2 * kEdge show their first and last kEdge entries, with
// "~" in place of the middle of the innermost axis and a "..." line for outer
// axes. Elements are padded to one width so columns line up.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "wfgen/runtime.hpp"

#include "internal.hpp"

namespace wfgen::rt {

namespace {

constexpr std::int64_t kEdge = 3;

// Indices of an axis of size n that are printed; -1 marks the elision.
std::vector<std::int64_t> shown_indices(std::int64_t n) {
  std::vector<std::int64_t> out;
  if (n <= 2 * kEdge) {
    for (std::int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (std::int64_t i = 0; i < kEdge; ++i) out.push_back(i);
  out.push_back(-1);
  for (std::int64_t i = n - kEdge; i < n; ++i) out.push_back(i);
  return out;
}

struct Printer {
  const Tensor& t;
  Shape shape, strides;
  std::vector<std::string> cells;  // formatted elements, in print order
  std::size_t next = 0;
  std::size_t width = 0;

  // First pass: format the shown elements, in the order print() visits them.
  void collect(int axis, std::int64_t off) {
    if (axis == t.rank()) {
      visit_dtype(t.dtype(), [&]<class E>(std::type_identity<E>) {
        cells.push_back(internal::format_element(static_cast<const E*>(t.raw_data())[off]));
      });
      width = std::max(width, cells.back().size());
      return;
    }
    for (std::int64_t i : shown_indices(shape[axis])) {
      if (i >= 0) collect(axis + 1, off + i * strides[axis]);
    }
  }

  // Second pass: nested parentheses; `column` is where this block's "(" is.
  void print(std::string& out, int axis, std::int64_t off, std::size_t column) {
    if (axis == t.rank()) {
      out += cells[next++];
      return;
    }
    const bool innermost = axis == t.rank() - 1;
    const std::vector<std::int64_t> idx = shown_indices(shape[axis]);
    out += '(';
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const bool last = k + 1 == idx.size();
      if (innermost) {
        std::string cell = idx[k] < 0 ? "~" : cells[next++];
        if (!last) cell.resize(std::max(cell.size(), idx[k] < 0 ? 1 : width), ' ');
        out += cell;
        if (!last) out += ' ';
      } else {
        if (idx[k] < 0) {
          out += "...";
        } else {
          print(out, axis + 1, off + idx[k] * strides[axis], column + 1);
        }
        if (!last) out += '\n' + std::string(column + 1, ' ');
      }
    }
    out += ')';
  }
};

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "{CPUTENSOR :undefined}";
  std::string out = std::string("{CPUTENSOR[") + dtype_c_name(dtype()) + "] :shape " +
                    shape_to_string(shape());
  if (!is_contiguous()) out += " :strides " + shape_to_string(strides());
  if (offset() != 0) out += " :offset " + std::to_string(offset());
  out += "\n  ";
  Printer p{*this, shape(), strides(), {}, 0, 0};
  if (numel() == 0) {
    out += "<no elements>";
  } else {
    p.collect(0, 0);
    p.print(out, 0, 0, 2);
  }
  out += std::string("\n  :storage ") + (storage()->owned() ? ":owned" : ":borrowed") + "}";
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

std::string shape_to_string(std::span<const std::int64_t> dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(dims[i]);
  }
  s += ')';
  return s;
}

}  // namespace wfgen::rt
