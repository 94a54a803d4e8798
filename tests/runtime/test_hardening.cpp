// Run-time hardening (issue 10): size arithmetic that cannot wrap (Size,
// bytes_of, ArenaPlan, the *_ref helpers, borrowed strides), aliasing and
// extents checked by VM::prepare at every opt level, null and aliased
// tensors at the parameter-file entry points, and the Status API.
#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "wfgen/model_support.hpp"
#include "wfgen/vm.hpp"

using rt::DType;
using rt::ErrorCode;
using rt::Instruction;
using rt::OperandSpec;
using rt::OptLevel;
using rt::Section;
using rt::Size;
using rt::Status;
using rt::Tensor;
using rt::TensorRef;
using rt::TensorRole;

namespace {

constexpr std::int64_t kBig = std::int64_t{1} << 40;

// Checks a failed Status: its code and a piece of its message.
void check_status(const Status& st, ErrorCode code, const std::string& text) {
  INFO("status: " << st.to_string());
  CHECK(!st.ok());
  CHECK(st.code() == code);
  CHECK(st.message().find(text) != std::string::npos);
}

}  // namespace

TEST_CASE("Status: ok by default, the code and message of an error", "[hardening]") {
  Status ok;
  CHECK(ok.ok());
  CHECK(static_cast<bool>(ok));
  CHECK(ok.to_string() == "ok");
  Status bad(ErrorCode::SizeOverflow, "a tensor of shape (? 3) ...");
  CHECK(!bad.ok());
  CHECK(bad.code() == ErrorCode::SizeOverflow);
  CHECK(bad.to_string() == "size overflow: a tensor of shape (? 3) ...");
  Status from = Status::from(rt::Error(ErrorCode::NullBuffer, "x"));
  CHECK(from.code() == ErrorCode::NullBuffer);
  CHECK(from.message() == "x");
  CHECK(std::string(rt::error_code_name(ErrorCode::SizeOverflow)) == "size overflow");
  CHECK(rt::last_fatal_error().ok());  // exceptions are on: fail() throws, records nothing
  REQUIRE_RT_ERROR(rt::fail(bad), ErrorCode::SizeOverflow, "a tensor of shape (? 3)");
}

TEST_CASE("Size: run-time dims whose arithmetic cannot wrap", "[hardening]") {
  const Size batch = 32;
  CHECK(static_cast<std::int64_t>(batch * 1024) == 32768);
  CHECK(static_cast<std::int64_t>((batch - 3) / 2 + 1) == 15);
  CHECK(static_cast<std::int64_t>(2 * batch - 1) == 63);
  CHECK(static_cast<std::int64_t>(Size(-7) / 2) == -4);  // floor division, as in the Subscript DSL
  CHECK(static_cast<std::int64_t>(7 / Size(2)) == 3);
  const Size huge = std::int64_t{1} << 62;
  CHECK(!(huge * 4).valid());
  CHECK(!(huge * 4 / 8).valid());  // an overflow stays invalid through later operations
  CHECK(!(Size(INT64_MAX) + 1).valid());
  CHECK(!(Size(INT64_MIN + 1) - 2).valid());
  CHECK(!(batch / 0).valid());
  CHECK((huge * 1).valid());
  // In a shape: what generated bind_() writes.
  const std::initializer_list<std::int64_t> shape = {batch * 1024, 10};
  CHECK(*shape.begin() == 32768);
}

TEST_CASE("bytes_of, numel_of and the *_ref helpers refuse sizes that do not fit", "[hardening]") {
  CHECK(rt::bytes_of(DType::f32, {3, 4}) == 48);
  CHECK(rt::bytes_of(DType::f64, {}) == 8);
  CHECK(rt::bytes_of(DType::f64, {0, kBig}) == 0);
  REQUIRE_RT_ERROR(rt::bytes_of(DType::f32, {kBig, kBig}), ErrorCode::SizeOverflow,
                   "a tensor of shape (1099511627776 1099511627776) has more elements than fit in int64");
  REQUIRE_RT_ERROR(rt::bytes_of(DType::f64, {std::int64_t{1} << 61, 2}), ErrorCode::SizeOverflow,
                   "more than fit in the address space (PTRDIFF_MAX)");
  REQUIRE_RT_ERROR(rt::bytes_of(DType::f32, {Size(kBig) * kBig * kBig, 3}), ErrorCode::SizeOverflow,
                   "a tensor of shape (? 3): a size computed from the inputs' sizes does not fit in int64");
  REQUIRE_RT_ERROR(rt::bytes_of(DType::f32, {3, -1}), ErrorCode::InvalidArgument, "has a negative size");
  REQUIRE_RT_ERROR(rt::numel_of({kBig, kBig, kBig}), ErrorCode::SizeOverflow, "more elements than fit in int64");

  float x = 0;
  REQUIRE_RT_ERROR(rt::contiguous_ref(&x, DType::f32, {kBig, kBig}), ErrorCode::SizeOverflow, "more elements");
  REQUIRE_RT_ERROR(rt::contiguous_ref(&x, DType::f32, {2, -3}), ErrorCode::InvalidArgument, "negative size");
  TensorRef base = rt::contiguous_ref(&x, DType::f32, {1, 1});
  base.strides[0] = INT64_MAX / 2;
  REQUIRE_RT_ERROR(rt::slice_ref(base, {4, 0}, {1, 1}, {1, 1}), ErrorCode::SizeOverflow, "slice_ref");
  REQUIRE_RT_ERROR(rt::slice_ref(base, {0, 0}, {3, 1}, {1, 1}), ErrorCode::SizeOverflow, "slice_ref");
  TensorRef wide = rt::contiguous_ref(&x, DType::f32, {1, 1});
  wide.shape[0] = wide.shape[1] = kBig * 8;
  REQUIRE_RT_ERROR(rt::reshape_ref(wide, {1}), ErrorCode::SizeOverflow, "reshape_ref");
}

TEST_CASE("ArenaPlan: checked slots, the first error kept and reported once", "[hardening]") {
  SECTION("a plan that fits") {
    rt::ArenaPlan plan;
    const Size batch = 3;
    const std::size_t s0 = plan.slot({plan.bytes(DType::f32, {batch, 5}), plan.bytes(DType::f32, {batch, 2})});
    const std::size_t s1 = plan.slot({plan.bytes(DType::f64, {batch * 100})});
    const std::size_t s2 = plan.slot({});
    CHECK(s0 == 0);
    CHECK(s1 == 64);
    CHECK(s2 == 64 + 2432);
    CHECK(plan.total() == 64 + 2432);
    CHECK(plan.status().ok());
    Tensor arena;
    CHECK(plan.allocate(arena).ok());
    CHECK(arena.nbytes() == 2496);
    Tensor same = arena;
    CHECK(plan.allocate(arena).ok());  // large enough: kept
    CHECK(arena.raw_data() == same.raw_data());
  }
  SECTION("a run-time dim times a constant that overflows") {
    rt::ArenaPlan plan;
    const Size batch = std::int64_t{1} << 60;
    const std::size_t s0 = plan.slot({plan.bytes(DType::f32, {batch * 1024, 10})});
    const std::size_t s1 = plan.slot({plan.bytes(DType::f32, {batch, 10})});
    CHECK(s0 == 0);
    CHECK(s1 == 0);
    check_status(plan.status(), ErrorCode::SizeOverflow,
                 "the model's arena: a tensor of shape (? 10): a size computed from the inputs' sizes does not fit in int64");
    Tensor arena;
    check_status(plan.allocate(arena), ErrorCode::SizeOverflow, "the model's arena");
    CHECK(!arena.defined());
  }
  SECTION("slots that each fit but not together") {
    rt::ArenaPlan plan;
    const Size batch = std::int64_t{1} << 58;
    plan.slot({plan.bytes(DType::f64, {batch})});  // 2^61 bytes
    plan.slot({plan.bytes(DType::f64, {batch})});
    plan.slot({plan.bytes(DType::f64, {batch})});
    plan.slot({plan.bytes(DType::f64, {batch})});  // 2^63 bytes in all
    check_status(plan.status(), ErrorCode::SizeOverflow, "the model's arena needs more than PTRDIFF_MAX bytes");
  }
  SECTION("a negative run-time size") {
    rt::ArenaPlan plan;
    const Size h = 1;
    plan.slot({plan.bytes(DType::f32, {h - 3, 4})});
    check_status(plan.status(), ErrorCode::InvalidArgument, "a tensor of shape (-2 4) has a negative size");
  }
}

TEST_CASE("tensor factories and borrowed strides report overflow, not wrapped sizes", "[hardening]") {
  Tensor t;
  check_status(Tensor::try_empty(DType::f64, {kBig, kBig}, t), ErrorCode::SizeOverflow, "overflows int64");
  check_status(Tensor::try_empty(DType::f64, {std::int64_t{1} << 61, 2}, t), ErrorCode::SizeOverflow,
               "its byte count overflows int64");
  check_status(Tensor::try_empty(DType::f32, {-1}, t), ErrorCode::InvalidArgument, "expected sizes >= 0");
  CHECK(!t.defined());
  CHECK(Tensor::try_empty(DType::f32, {2, 3}, t).ok());
  CHECK(t.numel() == 6);
  check_status(rt::try_zeros(t, DType::f32, {Size(kBig) * kBig * kBig}), ErrorCode::SizeOverflow,
               "a size computed from the inputs' sizes");
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer aborts on huge allocations instead
  check_status(rt::try_zeros(t, DType::u8, {std::int64_t{1} << 62}), ErrorCode::OutOfMemory, "cannot allocate");
#endif
  float x[4] = {};
  REQUIRE_RT_ERROR(Tensor::borrow(x, {4, 4}, {INT64_MAX / 2, 1}), ErrorCode::SizeOverflow,
                   "spans more elements than fit in int64");
  REQUIRE_RT_ERROR(Tensor::borrow(x, {std::int64_t{1} << 61, 2}), ErrorCode::SizeOverflow, "borrow");
}

TEST_CASE("InputBinder: a Status for every bad input, fail() for bind()", "[hardening]") {
  const char* const symbols[] = {"batch"};
  rt::InputBinder binder("M", "X[batch 3] -> Y[batch 3]", symbols);
  check_status(binder.check("X", Tensor(), DType::f32, {{"batch", 0}, {nullptr, 3}}), ErrorCode::NullBuffer,
               "the input X was not set");
  rt::InputBinder b2("M", "X[batch 3] -> Y[batch 3]", symbols);
  Tensor x = Tensor::zeros(DType::f32, {2, 3});
  CHECK(b2.check("X", x, DType::f32, {{"batch", 0}, {nullptr, 3}}).ok());
  CHECK(b2.value(0) == 2);
  check_status(b2.check("X", Tensor::zeros(DType::f32, {4, 3}), DType::f32, {{"batch", 0}, {nullptr, 3}}),
               ErrorCode::ShapeMismatch, "batch is determined as 2");
  REQUIRE_RT_ERROR(b2.bind("X", Tensor::zeros(DType::f64, {2, 3}), DType::f32, {{"batch", 0}, {nullptr, 3}}),
                   ErrorCode::DTypeMismatch, "has dtype f64, but the model takes f32");
}

// --- the VM checks aliasing and extents at prepare(), whatever the opt level --------

namespace {

// out <- a @ b for 2x2 f32 (a GEMM-like kernel: cannot work in place).
void matmul2(TensorRef* t, const rt::ScalarArg*) {
  auto a = rt::view_of<const float, 2>(t[0], "matmul2", "a");
  auto b = rt::view_of<const float, 2>(t[1], "matmul2", "b");
  auto c = rt::view_of<float, 2>(t[2], "matmul2", "c");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float s = 0;
      for (int k = 0; k < 2; ++k) s += a.data[i * a.strides[0] + k * a.strides[1]] * b.data[k * b.strides[0] + j * b.strides[1]];
      c.data[i * c.strides[0] + j * c.strides[1]] = s;
    }
}

const rt::TensorInfo kTensors[] = {{"A", TensorRole::Input}, {"B", TensorRole::Param}, {"C", TensorRole::Temp}};
const std::int32_t kOperands[] = {0, 1, 2};
const OperandSpec kSpecs[] = {{DType::f32, 2, -1}, {DType::f32, 2, -1}, {DType::f32, 2, -1, OperandSpec::kNoAlias}};
const Instruction kForward[] = {{"MATMUL-CPU", "matmul2", &matmul2, 0, 3, 0b100, 0, 0, 0, "C = A @ B  (t.yaml:3:7)"}};
const rt::Program kProgram{kTensors, kOperands, {}, kForward, {}, kSpecs};

}  // namespace

TEST_CASE("VM::prepare refuses a no-alias output over an input at every opt level", "[hardening][vm]") {
  Tensor a = Tensor::from_data<float>({2, 2}, {1, 2, 3, 4});
  Tensor b = Tensor::from_data<float>({2, 2}, {1, 0, 0, 1});
  Tensor c = Tensor::zeros(DType::f32, {2, 2});
  for (OptLevel level : {OptLevel::Safe, OptLevel::Checked, OptLevel::Fast}) {
    rt::VM vm(kProgram);
    vm.set_opt_level(level);
    TensorRef good[] = {a.ref(), b.ref(), c.ref()};
    vm.prepare(good);
    vm.run(Section::Forward);
    CHECK(c.at<float>({1, 0}) == 3.0f);

    // C over A (as if a user passed the model's own buffer as an input).
    TensorRef same[] = {a.ref(), b.ref(), a.ref()};
    REQUIRE_RT_ERROR(vm.prepare(same), ErrorCode::AliasedBuffer,
                     "instruction 0 <WfInst[op=MATMUL-CPU] : C <= op(<Input>A{float, (2 2)} <Param>B{float, (2 2)} "
                     "C{float, (2 2)})> (C = A @ B  (t.yaml:3:7)): written operand 2 (C) overlaps operand 0 (A) in "
                     "memory, expected separate buffers (the kernel cannot work in place)");
    CHECK(!vm.prepared());
    REQUIRE_RT_ERROR(vm.run(Section::Forward), ErrorCode::InvalidArgument, "before prepare()");
    try {
      vm.prepare(same);
    } catch (const rt::InstructionError& e) {
      CHECK(e.section() == Section::Forward);
      CHECK(e.instruction() == 0);
    }
    // A partial overlap: C is the second row of B's buffer and one more row.
    Tensor big = Tensor::zeros(DType::f32, {3, 2});
    TensorRef partial[] = {a.ref(), big.slice(0, 0, 2).ref(), big.slice(0, 1, 3).ref()};
    Status st = vm.try_prepare(partial, false);
    check_status(st, ErrorCode::AliasedBuffer, "written operand 2 (C) overlaps operand 1 (B) in memory");
    CHECK(a.at<float>({0, 0}) == 1.0f);  // nothing ran
  }
}

TEST_CASE("VM::try_prepare returns every failed check as a Status", "[hardening][vm]") {
  Tensor a = Tensor::zeros(DType::f32, {2, 2});
  Tensor b = Tensor::zeros(DType::f32, {2, 2});
  Tensor c = Tensor::zeros(DType::f32, {2, 2});
  Tensor d = Tensor::zeros(DType::f64, {2, 2});
  rt::VM vm(kProgram);
  vm.set_opt_level(OptLevel::Fast);
  TensorRef wrong_dtype[] = {a.ref(), d.ref(), c.ref()};
  CHECK(vm.try_prepare(wrong_dtype, false).ok());  // only the alias and extent checks
  check_status(vm.try_prepare(wrong_dtype, true), ErrorCode::DTypeMismatch, "operand 1 (B) has dtype f64, expected f32");
  TensorRef null_data[] = {a.ref(), b.ref(), c.ref()};
  null_data[0].data = nullptr;
  check_status(vm.try_prepare(null_data), ErrorCode::NullBuffer, "operand 0 (A) has no data (shape (2 2))");
  check_status(vm.try_prepare(nullptr), ErrorCode::NullBuffer, "null tensor table");
  TensorRef huge[] = {a.ref(), b.ref(), c.ref()};
  huge[1].shape[0] = kBig;
  huge[1].strides[0] = INT64_MAX / 4;
  check_status(vm.try_prepare(huge, false), ErrorCode::SizeOverflow,
               "operand 1 (B) of shape (1099511627776 2) and strides (2305843009213693951 1) spans more bytes than fit in the "
               "address space");
  // Stride 0: the extent fits in 8 bytes, but 2^80 elements do not fit in int64.
  TensorRef many[] = {a.ref(), b.ref(), c.ref()};
  many[1].shape[0] = many[1].shape[1] = kBig;
  many[1].strides[0] = many[1].strides[1] = 0;
  check_status(vm.try_prepare(many, false), ErrorCode::SizeOverflow,
               "operand 1 (B) of shape (1099511627776 1099511627776) has more elements than fit in int64");
  TensorRef good[] = {a.ref(), b.ref(), c.ref()};
  CHECK(vm.try_prepare(good).ok());
  vm.run(Section::Forward);
}

TEST_CASE("RefBuilder: the tensor-table entries of a model with the first error as a Status", "[hardening]") {
  float x[6] = {0, 1, 2, 3, 4, 5};
  SECTION("entries that fit equal those of the *_ref functions") {
    rt::RefBuilder refs;
    const TensorRef m = refs.contiguous("m", x, DType::f32, {2, 3});
    const TensorRef mt = refs.permute("mt", m, {1, 0});
    const TensorRef row = refs.broadcast("row", refs.slice("r", m, {1, 0}, {1, 1}, {1, 3}), {4, 3});
    const TensorRef flat = refs.reshape("flat", m, {6});
    const TensorRef col = refs.unsqueeze("col", flat, 1);
    const TensorRef back = refs.squeeze("back", col, 1);
    CHECK(refs.status().ok());
    auto same = [](const TensorRef& a, const TensorRef& b) { return std::memcmp(&a, &b, sizeof a) == 0; };
    CHECK(same(m, rt::contiguous_ref(x, DType::f32, {2, 3})));
    CHECK(same(mt, rt::permute_ref(m, {1, 0})));
    CHECK(same(row, rt::broadcast_ref(rt::slice_ref(m, {1, 0}, {1, 1}, {1, 3}), {4, 3})));
    CHECK(static_cast<float*>(row.data)[row.strides[0] * 3 + 2] == 5.0f);
    CHECK(row.strides[0] == 0);
    CHECK(same(back, flat));
  }
  SECTION("a broadcast view with more elements than int64 holds, though no buffer does") {
    rt::RefBuilder refs;
    const TensorRef one = refs.contiguous("one", x, DType::f32, {1, 1});
    const TensorRef wide = refs.broadcast("TID2", one, {kBig, kBig});
    CHECK(wide.data == nullptr);  // an empty entry after the error
    const TensorRef after = refs.contiguous("later", x, DType::f32, {2});
    CHECK(after.data == nullptr);
    check_status(refs.status(), ErrorCode::SizeOverflow,
                 "the tensor TID2 of the model: broadcast_ref: a view of shape (1099511627776 1099511627776) has more "
                 "elements than fit in int64");
    REQUIRE_RT_ERROR(rt::broadcast_ref(one, {kBig, kBig}), ErrorCode::SizeOverflow, "has more elements than fit in int64");
  }
  SECTION("a run-time size that overflowed, a negative one, a bad axis or shape") {
    const TensorRef one = rt::contiguous_ref(x, DType::f32, {1, 3});
    auto first_error = [&](auto make) {
      rt::RefBuilder refs;
      (void)make(refs);
      return refs.status();
    };
    check_status(first_error([&](rt::RefBuilder& r) { return r.broadcast("b", one, {Size(kBig) * kBig * kBig, 3}); }),
                 ErrorCode::SizeOverflow, "the tensor b of the model: broadcast_ref: a view of shape (? 3): a size computed");
    check_status(first_error([&](rt::RefBuilder& r) { return r.broadcast("b", one, {-2, 3}); }), ErrorCode::InvalidArgument,
                 "has a negative size");
    check_status(first_error([&](rt::RefBuilder& r) { return r.broadcast("b", one, {2, 4}); }), ErrorCode::ShapeMismatch,
                 "cannot broadcast (1 3) to (2 4)");
    check_status(first_error([&](rt::RefBuilder& r) { return r.reshape("r", one, {4}); }), ErrorCode::ShapeMismatch,
                 "cannot reshape (1 3) (3 elements) to (4)");
    check_status(first_error([&](rt::RefBuilder& r) { return r.squeeze("s", one, 1); }), ErrorCode::InvalidArgument,
                 "squeeze_ref: axis 1 of a tensor of shape (1 3), expected an axis of size 1");
    check_status(first_error([&](rt::RefBuilder& r) { return r.permute("p", one, {0, 2}); }), ErrorCode::InvalidArgument,
                 "permute_ref: axis 2 of a tensor of rank 2");
    check_status(first_error([&](rt::RefBuilder& r) { return r.slice("s", one, {0, 0}, {1, 1}, {1, Size(kBig) * kBig * kBig}); }),
                 ErrorCode::SizeOverflow, "the tensor s of the model: slice_ref: a view of shape (1 ?)");
  }
}

TEST_CASE("caller-owned outputs: prepare_output keeps or replaces, can_write_directly, copy_elements", "[hardening]") {
  Tensor none;
  REQUIRE(rt::prepare_output("Y", none, DType::f32, {2, 3}).ok());
  CHECK(none.shape() == rt::Shape({2, 3}));
  const void* kept = none.raw_data();
  REQUIRE(rt::prepare_output("Y", none, DType::f32, {2, 3}).ok());
  CHECK(none.raw_data() == kept);
  REQUIRE(rt::prepare_output("Y", none, DType::f32, {3, 2}).ok());
  CHECK(none.raw_data() != kept);
  check_status(rt::prepare_output("Y", none, DType::f32, {Size(kBig) * kBig * kBig, 2}), ErrorCode::SizeOverflow,
               "the output Y: a tensor of shape (? 2)");
  CHECK(none.shape() == rt::Shape({3, 2}));  // unchanged on error

  Tensor in = Tensor::zeros(DType::f32, {4, 4});
  Tensor param = Tensor::zeros(DType::f32, {4});
  Tensor own = Tensor::zeros(DType::f32, {4, 4});
  Tensor row_of_in = in.slice(0, 1, 2);
  Tensor strided = Tensor::zeros(DType::f32, {4, 4}).T();
  const Tensor outs[] = {own, row_of_in, strided};
  const Tensor inputs[] = {in};
  const Tensor params[] = {param};
  CHECK(rt::can_write_directly(outs, 0, inputs, params));
  CHECK(!rt::can_write_directly(outs, 1, inputs, params));  // overlaps an input
  CHECK(!rt::can_write_directly(outs, 2, inputs, params));  // not row-major
  Tensor other = own.reshape({16});
  const Tensor two[] = {own, other};
  CHECK(!rt::can_write_directly(two, 0, {}, {}));  // overlaps the other output

  Tensor src = Tensor::from_data<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor dst = Tensor::zeros(DType::f32, {3, 2}).T();
  rt::copy_elements(dst.ref(), src.ref());
  CHECK(dst.at<float>({1, 2}) == 5.0f);
  CHECK(dst.at<float>({0, 1}) == 1.0f);
  Tensor flat = Tensor::zeros(DType::f32, {2, 3});
  rt::copy_elements(flat.ref(), src.ref());
  CHECK(flat.at<float>({1, 0}) == 3.0f);
}

// --- parameter files: null and aliased destinations, the Status forms ----------------

TEST_CASE("parameter files: undefined or overlapping tensors are refused before the file is read", "[hardening]") {
  const std::string path = (std::filesystem::temp_directory_path() / ("wfgen_hardening_" + std::to_string(::getpid()) + ".wfparams")).string();
  const std::vector<std::string> names = {"W", "b"};
  std::vector<Tensor> params = {Tensor::full(DType::f32, {2, 3}, 1.5), Tensor::full(DType::f32, {3}, 2.5)};
  rt::save_parameters(path, names, params);

  std::vector<Tensor> unset = {Tensor::zeros(DType::f32, {2, 3}), Tensor()};
  REQUIRE_RT_ERROR(rt::load_parameters(path, names, unset), ErrorCode::NullBuffer,
                   "parameter 'b' is an undefined tensor (no storage), expected a tensor to load into");
  REQUIRE_RT_ERROR(rt::save_parameters(path + ".x", names, unset), ErrorCode::NullBuffer, "parameter 'b' is an undefined tensor");
  CHECK(!std::filesystem::exists(path + ".x"));

  Tensor storage = Tensor::zeros(DType::f32, {4, 3});
  std::vector<Tensor> overlapping = {storage.slice(0, 0, 2), storage.slice(0, 1, 2).reshape({3})};
  REQUIRE_RT_ERROR(rt::load_parameters(path, names, overlapping), ErrorCode::AliasedBuffer,
                   "parameter 'b' overlaps 'W' in memory, expected separate tensors to load into");
  CHECK(storage.at<float>({0, 0}) == 0.0f);  // nothing loaded

  std::vector<Tensor> into = {Tensor::zeros(DType::f32, {2, 3}), Tensor::zeros(DType::f32, {3})};
  CHECK(rt::try_load_parameters(path, names, into).ok());
  CHECK(into[0].at<float>({1, 2}) == 1.5f);
  CHECK(into[1].at<float>({0}) == 2.5f);
  std::vector<Tensor> wrong = {Tensor::zeros(DType::f32, {2, 4}), Tensor::zeros(DType::f32, {3})};
  check_status(rt::try_load_parameters(path, names, wrong), ErrorCode::BadParameterFile, "parameter 'W' has shape (2 3), expected (2 4)");
  check_status(rt::try_load_parameters(path + ".missing", names, into), ErrorCode::BadParameterFile, "cannot open");
  std::filesystem::remove(path);
}
