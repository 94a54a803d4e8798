// Core vocabulary shared by the wfgen runtime and by generated kernels:
// element types, typed strided views and the type-erased TensorRef.
// Std-only, header-only, plain data.
//
// A generated kernel for a node of rank R and element type T takes its
// operands as `View<const T, R>` (inputs it does not write) and `View<T, R>`
// (outputs and in-place operands). Sizes, strides and the data pointer are
// runtime values, so one kernel serves every shape of its rank: contiguous
// tensors, slices with steps, permuted views and broadcast operands
// (stride 0). Strides are counted in elements, not bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace wfgen::rt {

// Element types. The order is part of the parameter-file format: append only.
enum class DType : std::uint8_t { f32 = 0, f64 = 1, i32 = 2, i64 = 3, u8 = 4 };
inline constexpr int kDTypeCount = 5;

// Largest rank a tensor may have.
inline constexpr int kMaxRank = 8;

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

// Whether values of the dtype are floating point (f32, f64) rather than
// integers or bools: what decides division, NaN handling and GEMMs.
constexpr bool dtype_is_float(DType t) { return t == DType::f32 || t == DType::f64; }

// Spelling used in specs and generated names: "f32", "f64", "i32", "i64", "u8".
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

// Spelling used in disassembly, as in cl-waffe2: "float", "double", ...
constexpr const char* dtype_c_name(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
  }
  return "?";
}

// Spelling of the element type in C++ source: "float", "std::int32_t", ...
// (what generated code and wfgen's checks of user kernels write).
constexpr const char* dtype_cpp_type(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "std::int32_t";
    case DType::i64: return "std::int64_t";
    case DType::u8: return "std::uint8_t";
  }
  return "?";
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::u8; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<std::remove_const_t<T>>::value;

// A typed, non-owning strided view of rank R. T may be const.
//
// The copy constructor is written out on purpose: a class with a
// user-provided copy constructor is passed by invisible reference in the
// Itanium C++ ABI (Linux, macOS), so when a kernel's type-erased wrapper
// calls it with view_of(...) arguments, each View is built once, in place,
// and the kernel reads it through a pointer. As a plain aggregate (24 bytes
// and more, so passed in memory) GCC built each View on the stack and then
// copied it into the argument area with loads of other sizes than its
// stores, which stall on store forwarding: about 6 ns per call, most of the
// VM's cost of a 16-element kernel.
template <class T, int R>
struct View {
  static_assert(R >= 0 && R <= kMaxRank, "rank out of range");
  using element_type = T;
  static constexpr int rank = R;

  T* data = nullptr;
  std::array<std::int64_t, R> shape{};
  std::array<std::int64_t, R> strides{};

  constexpr View() = default;
  constexpr View(T* data_, const std::array<std::int64_t, R>& shape_, const std::array<std::int64_t, R>& strides_) noexcept
      : data(data_), shape(shape_), strides(strides_) {}
  constexpr View(const View& other) noexcept : data(other.data), shape(other.shape), strides(other.strides) {}
  constexpr View& operator=(const View& other) noexcept = default;

  std::int64_t size() const {
    std::int64_t n = 1;
    for (int i = 0; i < R; ++i) n *= shape[i];
    return n;
  }
  // Implicit conversion View<T,R> -> View<const T,R>.
  operator View<const T, R>() const
    requires(!std::is_const_v<T>)
  {
    return View<const T, R>{data, shape, strides};
  }
};

// Type-erased, POD description of a tensor for C-like interfaces and
// generated dispatch code. `data` already includes the tensor's offset;
// strides are in elements. Entries past `rank` are zero.
struct TensorRef {
  void* data;
  DType dtype;
  std::int32_t rank;
  std::int64_t shape[kMaxRank];
  std::int64_t strides[kMaxRank];
};
static_assert(std::is_trivial_v<TensorRef> && std::is_standard_layout_v<TensorRef>);

}  // namespace wfgen::rt
