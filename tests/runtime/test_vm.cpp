// The instruction-sequence VM: execution, opt-level checks, error wrapping,
// logging, disassembly and profile layouts. Kernels are tiny hand-written
// KernelFns; programs are built by hand as a generated model would.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "wfgen/vm.hpp"

using rt::DType;
using rt::ErrorCode;
using rt::Instruction;
using rt::OperandSpec;
using rt::OptLevel;
using rt::Section;
using rt::Tensor;
using rt::TensorRef;
using rt::TensorRole;

namespace {

// --- kernels -----------------------------------------------------------------

// out <- a + b (+ c when there are 4 operands), rank 2, f64.
void add_f64_r2(TensorRef* t, const rt::ScalarArg*) {
  auto out = rt::view_of<double, 2>(t[0], "add_f64_r2", "out");
  auto a = rt::view_of<const double, 2>(t[1], "add_f64_r2", "a");
  auto b = rt::view_of<const double, 2>(t[2], "add_f64_r2", "b");
  for (std::int64_t i = 0; i < out.shape[0]; ++i)
    for (std::int64_t j = 0; j < out.shape[1]; ++j)
      out.data[i * out.strides[0] + j * out.strides[1]] =
          a.data[i * a.strides[0] + j * a.strides[1]] + b.data[i * b.strides[0] + j * b.strides[1]];
}

// out <- x * scalars[0].f, rank 2, f64.
void scale_f64_r2(TensorRef* t, const rt::ScalarArg* s) {
  auto out = rt::view_of<double, 2>(t[0], "scale_f64_r2", "out");
  auto x = rt::view_of<const double, 2>(t[1], "scale_f64_r2", "x");
  for (std::int64_t i = 0; i < out.shape[0]; ++i)
    for (std::int64_t j = 0; j < out.shape[1]; ++j)
      out.data[i * out.strides[0] + j * out.strides[1]] = x.data[i * x.strides[0] + j * x.strides[1]] * s[0].f;
}

std::vector<std::int64_t> g_order;  // tags of the record kernel, in call order
void record(TensorRef*, const rt::ScalarArg* s) { g_order.push_back(s[0].i); }

void throw_rt(TensorRef*, const rt::ScalarArg*) {
  throw rt::Error(ErrorCode::OutOfBounds, "index 7 is out of bounds for axis 0 of shape (2 3), expected 0..1");
}
void throw_std(TensorRef*, const rt::ScalarArg*) { throw std::runtime_error("something odd"); }
void throw_int(TensorRef*, const rt::ScalarArg*) { throw 42; }

// Corrupts its own gathered descriptor: rank 3 from the second call on, as a
// kernel that rebinds a view might. Only checks that run again see it.
int g_corrupt_calls = 0;
void corrupt_rank(TensorRef* t, const rt::ScalarArg*) {
  ++g_corrupt_calls;
  t[0].rank = 3;
}

void noop(TensorRef*, const rt::ScalarArg*) {}

// --- the test program --------------------------------------------------------
//
// forward:   h <= add(h X W);  y <= scale(y h, 2.0);  hT <= view(hT h)
// pullback:  dX <= scale(dX dy, 0.5);  dX <= add(dX dX SV4BW(h)), i.e. dX = dX + h

enum : std::int32_t { X, W, H, Y, HT, DY, DX };

const rt::TensorInfo kTensors[] = {{"X", TensorRole::Input}, {"W", TensorRole::Param}, {"h", TensorRole::Temp},
                                   {"y", TensorRole::Temp},  {"hT", TensorRole::View}, {"dy", TensorRole::Input},
                                   {"dX", TensorRole::Grad}};
const std::int32_t kOperands[] = {H, X, W, Y, H, HT, H, DX, DY, DX, DX, H};
const OperandSpec kSpecs[] = {
    {DType::f64, 2, 0}, {DType::f64, 2, 0}, {DType::f64, 2, 0},  // add
    {DType::f64, 2, 0}, {DType::f64, 2, 0},                      // scale
    {DType::f64, 2, -1}, {DType::f64, 2, -1},                    // view
    {DType::f64, 2, 0}, {DType::f64, 2, 0},                      // scale
    {DType::f64, 2, 0}, {DType::f64, 2, 0}, {DType::f64, 2, 0},  // add
};
const rt::ScalarArg kScalars[] = {{.f = 2.0}, {.f = 0.5}};
const Instruction kForward[] = {
    {"ADD-CPU", "add_f64_r2", &add_f64_r2, 0, 3, 0b1, 0, 0, 0, "h = X + W  (test.yaml:3:7)"},
    {"SCALE-CPU", "scale_f64_r2", &scale_f64_r2, 3, 2, 0b1, 0, 0, 1, "y = 2.0 * h  (test.yaml:4:7)"},
    {"VIEW-T", "", nullptr, 5, 2, 0b1, 0, 0, 0, "return y, h.T  (test.yaml:5:7)"},
};
const Instruction kBackward[] = {
    {"SCALE-CPU", "scale_f64_r2", &scale_f64_r2, 7, 2, 0b1, 0, 1, 1, nullptr},
    {"ADD-CPU", "add_f64_r2", &add_f64_r2, 9, 3, 0b1, 0b100, 0, 0, nullptr},
};
const rt::Program kProgram{kTensors, kOperands, kScalars, kForward, kBackward, kSpecs};

// The model side: owns tensors and the table the VM reads.
struct Model {
  Tensor x = iota({2, 3});
  Tensor w = Tensor::full(DType::f64, {2, 3}, 10.0);
  Tensor h = Tensor::zeros(DType::f64, {2, 3});
  Tensor y = Tensor::zeros(DType::f64, {2, 3});
  Tensor dy = Tensor::full(DType::f64, {2, 3}, 4.0);
  Tensor dx = Tensor::zeros(DType::f64, {2, 3});
  std::vector<TensorRef> table;

  Model() { fill(); }
  void fill() { table = {x.ref(), w.ref(), h.ref(), y.ref(), h.T().ref(), dy.ref(), dx.ref()}; }
};

// The InstructionError `expr` throws (fails the test if none).
template <class F>
rt::InstructionError instruction_error(F&& f) {
  try {
    f();
  } catch (const rt::InstructionError& e) {
    return e;
  }
  FAIL("expected an InstructionError");
  throw std::logic_error("unreachable");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("vm runs instructions in order with their operands and scalars", "[vm]") {
  Model m;
  rt::VM vm(kProgram);
  CHECK(vm.opt_level() == OptLevel::Checked);
  CHECK_FALSE(vm.prepared());
  vm.prepare(m.table.data());
  CHECK(vm.prepared());
  vm.run(Section::Forward);
  check_elements(m.h, [](const rt::Shape& i) { return 10.0 + static_cast<double>(linear({2, 3}, i)); });
  check_elements(m.y, [](const rt::Shape& i) { return 2.0 * (10.0 + static_cast<double>(linear({2, 3}, i))); });
  vm.run(Section::Backward);  // dX = 0.5 * dy; dX = dX + h
  check_elements(m.dx, [](const rt::Shape& i) { return 2.0 + 10.0 + static_cast<double>(linear({2, 3}, i)); });

  // New shapes: the model refills the table and prepares again.
  m.x = iota({1, 4});
  m.w = Tensor::full(DType::f64, {1, 4}, 1.0);
  m.h = Tensor::zeros(DType::f64, {1, 4});
  m.y = Tensor::zeros(DType::f64, {1, 4});
  m.fill();
  vm.prepare(m.table.data());
  vm.run(Section::Forward);
  check_elements(m.y, [](const rt::Shape& i) { return 2.0 * (1.0 + static_cast<double>(i[1])); });
}

TEST_CASE("vm: Section::FreshBackward runs the program's backward_fresh, or its pullback when it has none", "[vm]") {
  // The variant a model runs after zero_grad(): here its second instruction
  // does nothing, so dX = 0.5 * dy alone, where the pullback adds h.
  const rt::KernelSwap swaps[] = {{1, "NOOP-CPU", "noop", &noop}};
  const std::vector<Instruction> fresh = rt::with_kernels(kBackward, swaps);
  REQUIRE(fresh.size() == 2);
  CHECK(fresh[0].fn == kBackward[0].fn);
  CHECK(fresh[1].first_operand == kBackward[1].first_operand);
  CHECK(fresh[1].saved == kBackward[1].saved);
  const rt::KernelSwap beyond[] = {{2, "NOOP-CPU", "noop", &noop}};
  CHECK_THROWS_WITH(rt::with_kernels(kBackward, beyond), Catch::Contains("with_kernels: instruction 2 of 2, expected 0..1"));
  rt::Program with_fresh = kProgram;
  with_fresh.backward_fresh = fresh;
  Model m;
  rt::VM vm(with_fresh);
  vm.prepare(m.table.data());
  vm.run(Section::Forward);
  vm.run(Section::FreshBackward);
  check_elements(m.dx, [](const rt::Shape&) { return 2.0; });
  vm.run(Section::Backward);
  check_elements(m.dx, [](const rt::Shape& i) { return 2.0 + 10.0 + static_cast<double>(linear({2, 3}, i)); });
  const std::string listing = vm.disassemble();
  CHECK(listing.find(" [Pullback after zero_grad()]: \n<WfInst[op=SCALE-CPU] : dX <= op(") != std::string::npos);
  CHECK(listing.find("<WfInst[op=NOOP-CPU]  : dX <= op(") != std::string::npos);
  CHECK(vm.describe(Section::FreshBackward, 1).find("NOOP-CPU") != std::string::npos);

  Model plain_model;
  rt::VM plain(kProgram);
  plain.prepare(plain_model.table.data());
  plain.run(Section::Forward);
  plain.run(Section::FreshBackward);
  check_elements(plain_model.dx, [](const rt::Shape& i) { return 2.0 + 10.0 + static_cast<double>(linear({2, 3}, i)); });
  CHECK(plain.disassemble().find("zero_grad") == std::string::npos);

  rt::Program short_fresh = kProgram;
  short_fresh.backward_fresh = std::span<const Instruction>(fresh.data(), 1);
  CHECK_THROWS_WITH(rt::VM(short_fresh), Catch::Contains("backward_fresh has 1 instructions, expected 0 or 2"));
}

TEST_CASE("vm calls every kernel once per run, in order, and skips view-only instructions", "[vm]") {
  const rt::TensorInfo tensors[] = {{"a", TensorRole::Temp}};
  const std::int32_t operands[] = {0};
  const rt::ScalarArg scalars[] = {{.i = 10}, {.i = 11}, {.i = 12}, {.i = 13}};
  const Instruction fwd[] = {
      {"REC", "record", &record, 0, 1, 0, 0, 0, 1, nullptr},
      {"REC", "record", &record, 0, 1, 0, 0, 2, 1, nullptr},
      {"VIEW", "", nullptr, 0, 1, 0, 0, 0, 0, nullptr},
      {"REC", "record", &record, 0, 1, 0, 0, 1, 1, nullptr},
  };
  const Instruction bwd[] = {{"REC", "record", &record, 0, 1, 0, 0, 3, 1, nullptr}};
  rt::VM vm(rt::Program{tensors, operands, scalars, fwd, bwd, {}});
  Tensor a = Tensor::zeros(DType::f32, {2});
  TensorRef table[] = {a.ref()};
  vm.prepare(table);
  g_order.clear();
  vm.run(Section::Forward);
  vm.run(Section::Backward);
  vm.run(Section::Forward);
  CHECK(g_order == std::vector<std::int64_t>{10, 12, 11, 13, 10, 12, 11});
}

namespace {
std::vector<std::int64_t> g_limits;  // detail::streaming_limit() as each call of record_limit saw it
void record_limit(TensorRef*, const rt::ScalarArg*) { g_limits.push_back(rt::detail::streaming_limit()); }
}  // namespace

TEST_CASE("vm: a kernel writing a result (OperandSpec::kResult) streams from streaming_result_bytes()", "[vm]") {
  // Three calls: writing a result; reading it (the result flag on an operand
  // it does not write counts for nothing); writing a temporary.
  const rt::TensorInfo tensors[] = {{"y", TensorRole::Temp}, {"t", TensorRole::Temp}};
  const std::int32_t operands[] = {0, 1, 0, 1};
  OperandSpec specs[4] = {{DType::f32, 1, -1}, {DType::f32, 1, -1}, {DType::f32, 1, -1}, {DType::f32, 1, -1}};
  specs[0].flags = specs[2].flags = OperandSpec::kResult;
  const Instruction fwd[] = {
      {"REC", "record_limit", &record_limit, 0, 1, 0b1, 0, 0, 0, nullptr},
      {"REC", "record_limit", &record_limit, 2, 2, 0b10, 0, 0, 0, nullptr},
      {"REC", "record_limit", &record_limit, 1, 1, 0b1, 0, 0, 0, nullptr},
  };
  rt::VM vm(rt::Program{tensors, operands, {}, fwd, {}, specs});
  Tensor y = Tensor::zeros(DType::f32, {4}), t = Tensor::zeros(DType::f32, {4});
  TensorRef table[] = {y.ref(), t.ref()};
  const std::int64_t store = rt::streaming_store_bytes(), result = rt::streaming_result_bytes();
  rt::set_streaming_store_bytes(1000);
  rt::set_streaming_result_bytes(7);
  CHECK(rt::detail::streaming_limit() == 1000);
  const std::vector<std::int64_t> expected = {7, 1000, 1000};
  for (OptLevel level : {OptLevel::Safe, OptLevel::Checked, OptLevel::Fast}) {
    vm.set_opt_level(level);
    vm.prepare(table);
    for (int run = 0; run < 2; ++run) {  // the first run checks at level 1, the second is the hot loop
      g_limits.clear();
      vm.run(Section::Forward);
      CHECK(g_limits == expected);
    }
  }
  std::ostringstream log;
  vm.set_logging(&log);
  g_limits.clear();
  vm.run(Section::Forward);
  CHECK(g_limits == expected);
  vm.set_logging(nullptr);
  g_limits.clear();
  (void)vm.profile(Section::Forward, 1);
  CHECK(g_limits == expected);
  CHECK(rt::detail::streaming_limit() == 1000);  // restored after each call
  CHECK_THROWS_AS(rt::set_streaming_result_bytes(-2), rt::Error);
  rt::set_streaming_store_bytes(store);
  rt::set_streaming_result_bytes(result);
}

TEST_CASE("vm refuses to run before prepare and rejects malformed programs", "[vm]") {
  rt::VM vm(kProgram);
  REQUIRE_RT_ERROR(vm.run(Section::Forward), ErrorCode::InvalidArgument,
                   "VM::run(forward) before prepare(), expected the tensor table first");
  REQUIRE_RT_ERROR(vm.prepare(nullptr), ErrorCode::NullBuffer, "VM::prepare got a null tensor table, expected 7 entries");
  REQUIRE_RT_ERROR(vm.profile(Section::Forward, 0), ErrorCode::InvalidArgument, "n_sample 0, expected >= 1");
  REQUIRE_RT_ERROR(vm.set_opt_level(static_cast<OptLevel>(4)), ErrorCode::InvalidArgument, "opt level 4 is not 1, 2 or 3");

  const std::int32_t bad_ids[] = {0, 9};
  REQUIRE_RT_ERROR(rt::VM(rt::Program{kTensors, bad_ids, {}, {}, {}, {}}), ErrorCode::InvalidArgument,
                   "invalid VM program: operand 1 refers to tensor 9, expected 0..6");
  REQUIRE_RT_ERROR(rt::VM(rt::Program{kTensors, kOperands, kScalars, kForward, kBackward,
                                      std::span<const OperandSpec>(kSpecs, 3)}),
                   ErrorCode::InvalidArgument, "operand_specs has 3 entries, expected 0 or 12 (one per operand)");
  const Instruction past_end[] = {{"ADD-CPU", "add", &add_f64_r2, 10, 3, 1, 0, 0, 0, nullptr}};
  REQUIRE_RT_ERROR(rt::VM(rt::Program{kTensors, kOperands, {}, past_end, {}, {}}), ErrorCode::InvalidArgument,
                   "forward instruction 0 (ADD-CPU) has operands 10..13, beyond the 12 operands of the program");
  const Instruction bad_scalar[] = {{"SCALE-CPU", "scale", &scale_f64_r2, 0, 2, 1, 0, 1, 2, nullptr}};
  REQUIRE_RT_ERROR(rt::VM(rt::Program{kTensors, kOperands, kScalars, {}, bad_scalar, {}}),
                   ErrorCode::InvalidArgument,
                   "pullback instruction 0 (SCALE-CPU) has scalars 1..3, beyond the 2 scalars of the program");
  const Instruction bad_mask[] = {{"ADD-CPU", "add", &add_f64_r2, 0, 3, 0b1000, 0, 0, 0, nullptr}};
  REQUIRE_RT_ERROR(rt::VM(rt::Program{kTensors, kOperands, {}, bad_mask, {}, {}}), ErrorCode::InvalidArgument,
                   "marks operands beyond its 3 as written or saved");
}

TEST_CASE("vm checks dtypes, ranks and shapes at level 1 and 2, not at level 3", "[vm]") {
  const std::string add_line =
      "instruction 0 <WfInst[op=ADD-CPU] : h <= op(h{double, (2 3)} <Input>X{double, (2 3)} "
      "<Param>W{float, (2 3)})> (h = X + W  (test.yaml:3:7)): ";
  Model m;
  rt::VM vm(kProgram);

  SECTION("wrong dtype") {
    m.w = Tensor::full(DType::f32, {2, 3}, 1.0);
    m.fill();
    vm.prepare(m.table.data());
    for (OptLevel level : {OptLevel::Safe, OptLevel::Checked}) {
      vm.set_opt_level(level);
      for (int call = 0; call < 2; ++call) {  // a failed check is not "done"
        auto e = instruction_error([&] { vm.run(Section::Forward); });
        CHECK(e.code() == ErrorCode::DTypeMismatch);
        CHECK(std::string(e.what()) == add_line + "operand 2 (W) has dtype f32, expected f64");
        CHECK(e.section() == Section::Forward);
        CHECK(e.instruction() == 0);
        CHECK_FALSE(e.cause());
      }
    }
    // Level 3 does not check: the kernel itself finds the mismatch, and the
    // VM wraps what it throws.
    vm.set_opt_level(OptLevel::Fast);
    auto e = instruction_error([&] { vm.run(Section::Forward); });
    CHECK(e.code() == ErrorCode::DTypeMismatch);
    CHECK(std::string(e.what()) == add_line + "add_f64_r2: operand b has dtype f32, expected f64");
    CHECK(e.cause());
  }

  SECTION("wrong rank") {
    m.w = Tensor::full(DType::f64, {2, 3, 1}, 1.0);
    m.fill();
    vm.prepare(m.table.data());
    vm.set_opt_level(OptLevel::Safe);
    REQUIRE_RT_ERROR(vm.run(Section::Forward), ErrorCode::RankMismatch,
                     "operand 2 (W) has rank 3 (shape (2 3 1)), expected 2");
  }

  SECTION("element-wise operands with different shapes") {
    m.w = Tensor::full(DType::f64, {3, 2}, 1.0);
    m.fill();
    vm.prepare(m.table.data());
    REQUIRE_RT_ERROR(vm.run(Section::Forward), ErrorCode::ShapeMismatch,
                     "<Param>W{double, (3 2)})> (h = X + W  (test.yaml:3:7)): operand 2 (W) has shape (3 2), "
                     "expected (2 3) as operand 0 (h) (element-wise operands have equal shapes)");
  }

  SECTION("a tensor without data") {
    m.table[X].data = nullptr;
    vm.prepare(m.table.data());
    REQUIRE_RT_ERROR(vm.run(Section::Forward), ErrorCode::NullBuffer, "operand 1 (X) has no data (shape (2 3))");
  }

  SECTION("a broadcast output") {
    m.table[H] = Tensor::zeros(DType::f64, {1, 3}).broadcast_to({2, 3}).ref();
    vm.prepare(m.table.data());
    REQUIRE_RT_ERROR(vm.run(Section::Forward), ErrorCode::InvalidView,
                     "written operand 0 (h) has stride 0 on axis 0 of size 2 (shape (2 3), strides (0 1)), expected "
                     "a view that does not broadcast");
  }

  SECTION("an output that partly overlaps an input") {
    Tensor sq = Tensor::zeros(DType::f64, {3, 3});
    m.h = sq;
    m.y = Tensor::zeros(DType::f64, {3, 3});
    m.fill();
    m.table[Y] = sq.T().ref();             // y <= scale(y h) with y = h.T
    m.table[X] = m.table[W] = m.table[H];  // keep the add's group consistent
    vm.prepare(m.table.data());
    REQUIRE_RT_ERROR(vm.run(Section::Forward), ErrorCode::AliasedBuffer,
                     "instruction 1 <WfInst[op=SCALE-CPU] : y <= op(y{double, (3 3)} h{double, (3 3)})> "
                     "(y = 2.0 * h  (test.yaml:4:7)): written operand 0 (y) overlaps operand 1 (h) in memory, "
                     "expected the identical view or separate buffers (shape (3 3) strides (1 3) vs shape (3 3) "
                     "strides (3 1))");
  }

  SECTION("level 2 checks only the first call after prepare, level 1 every call") {
    const rt::TensorInfo tensors[] = {{"a", TensorRole::Temp}};
    const std::int32_t operands[] = {0};
    const OperandSpec specs[] = {{DType::f32, 2, -1}};
    const Instruction fwd[] = {{"CORRUPT", "corrupt_rank", &corrupt_rank, 0, 1, 0b1, 0, 0, 0, "a = corrupt(a)"}};
    rt::VM v(rt::Program{tensors, operands, {}, fwd, {}, specs});
    Tensor a = Tensor::zeros(DType::f32, {2, 2});
    TensorRef table[] = {a.ref()};
    g_corrupt_calls = 0;

    v.set_opt_level(OptLevel::Checked);
    v.prepare(table);
    v.run(Section::Forward);  // checked, then the kernel corrupts its descriptor
    v.run(Section::Forward);  // not checked again
    v.run(Section::Forward);
    CHECK(g_corrupt_calls == 3);
    v.prepare(table);  // fresh descriptors: checked (and fine) again
    v.run(Section::Forward);
    v.run(Section::Forward);
    CHECK(g_corrupt_calls == 5);

    v.set_opt_level(OptLevel::Safe);
    v.prepare(table);
    v.run(Section::Forward);
    REQUIRE_RT_ERROR(v.run(Section::Forward), ErrorCode::RankMismatch,
                     "instruction 0 <WfInst[op=CORRUPT] : a <= op(a{float, (2 2 0)})> (a = corrupt(a)): "
                     "operand 0 (a) has rank 3 (shape (2 2 0)), expected 2");
    CHECK(g_corrupt_calls == 6);

    v.set_opt_level(OptLevel::Fast);
    v.run(Section::Forward);
    v.run(Section::Forward);
    CHECK(g_corrupt_calls == 8);
  }
}

TEST_CASE("vm in-place and no-alias rules", "[vm]") {
  Model m;
  rt::VM vm(kProgram);
  vm.set_opt_level(OptLevel::Safe);
  // h <= add(h h h): the identical view is in place, allowed.
  m.table[X] = m.table[W] = m.table[H];
  vm.prepare(m.table.data());
  vm.run(Section::Forward);

  OperandSpec specs[12];
  std::copy(std::begin(kSpecs), std::end(kSpecs), specs);
  specs[0].flags = OperandSpec::kNoAlias;
  rt::VM strict(rt::Program{kTensors, kOperands, kScalars, kForward, kBackward, specs});
  // kNoAlias is checked by prepare(), at every opt level.
  strict.set_opt_level(OptLevel::Fast);
  REQUIRE_RT_ERROR(strict.prepare(m.table.data()), ErrorCode::AliasedBuffer,
                   "written operand 0 (h) overlaps operand 1 (X) in memory, expected separate buffers (the kernel "
                   "cannot work in place)");

  Tensor sq = Tensor::zeros(DType::f64, {3, 3});
  m.h = sq;
  m.y = Tensor::zeros(DType::f64, {3, 3});
  m.fill();
  m.table[Y] = sq.T().ref();
  m.table[X] = m.table[W] = m.table[H];
  specs[0].flags = 0;
  specs[3].flags = OperandSpec::kMayAlias;
  rt::VM lenient(rt::Program{kTensors, kOperands, kScalars, kForward, kBackward, specs});
  lenient.set_opt_level(OptLevel::Safe);
  lenient.prepare(m.table.data());
  lenient.run(Section::Forward);
}

TEST_CASE("vm wraps kernel exceptions with the instruction and its source line", "[vm]") {
  const rt::TensorInfo tensors[] = {{"h", TensorRole::Temp}, {"y", TensorRole::Temp}};
  const std::int32_t operands[] = {1, 0};
  auto program_with = [&](rt::KernelFn fn, std::vector<Instruction>& storage) {
    storage = {{"NOOP", "noop", &noop, 0, 2, 0b1, 0, 0, 0, "h = f(h)  (m.yaml:4:7)"},
               {"BOOM-CPU", "boom_f32_r1", fn, 0, 2, 0b1, 0, 0, 0, "y = boom(h)  (m.yaml:5:7)"}};
    return rt::Program{tensors, operands, {}, storage, {}, {}};
  };
  Tensor h = Tensor::zeros(DType::f32, {3}), y = Tensor::zeros(DType::f32, {3});
  TensorRef table[] = {h.ref(), y.ref()};
  const std::string where =
      "instruction 1 <WfInst[op=BOOM-CPU] : y <= op(y{float, (3)} h{float, (3)})> (y = boom(h)  (m.yaml:5:7)): ";
  std::vector<Instruction> storage;
  std::ostringstream log;

  for (bool logging : {false, true}) {
    INFO("logging " << logging);
    {
      rt::VM vm(program_with(&throw_rt, storage));
      if (logging) vm.set_logging(&log);
      vm.prepare(table);
      auto e = instruction_error([&] { vm.run(Section::Forward); });
      CHECK(e.code() == ErrorCode::OutOfBounds);
      CHECK(std::string(e.what()) ==
            where + "index 7 is out of bounds for axis 0 of shape (2 3), expected 0..1");
      CHECK(e.instruction() == 1);
      REQUIRE(e.cause());
      CHECK_THROWS_AS(std::rethrow_exception(e.cause()), rt::Error);
      // profile() wraps the same way
      auto p = instruction_error([&] { vm.profile(Section::Forward, 2); });
      CHECK(std::string(p.what()) == std::string(e.what()));
    }
    {
      rt::VM vm(program_with(&throw_std, storage));
      if (logging) vm.set_logging(&log);
      vm.prepare(table);
      auto e = instruction_error([&] { vm.run(Section::Forward); });
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()) == where + "something odd");
      CHECK_THROWS_AS(std::rethrow_exception(e.cause()), std::runtime_error);
    }
    {
      rt::VM vm(program_with(&throw_int, storage));
      if (logging) vm.set_logging(&log);
      vm.prepare(table);
      auto e = instruction_error([&] { vm.run(Section::Forward); });
      CHECK(std::string(e.what()) == where + "the kernel threw an exception that is not a std::exception");
      CHECK_THROWS_AS(std::rethrow_exception(e.cause()), int);
    }
  }
  CHECK(log.str().find("    (threw)\n") != std::string::npos);
}

TEST_CASE("vm logging prints each instruction with arguments before and results after", "[vm]") {
  Model m;
  rt::VM vm(kProgram);
  std::ostringstream log;
  vm.set_logging(&log);
  vm.prepare(m.table.data());
  vm.run(Section::Forward);
  const std::string expected =
      "[wfgen vm] forward 0/3 <WfInst[op=ADD-CPU] : h <= op(h{double, (2 3)} <Input>X{double, (2 3)} "
      "<Param>W{double, (2 3)})>  ; h = X + W  (test.yaml:3:7)\n"
      "    arg 0 h{double, (2 3)} = (0.0 0.0 0.0 0.0 0.0 0.0)\n"
      "    arg 1 <Input>X{double, (2 3)} = (0.0 1.0 2.0 3.0 4.0 5.0)\n"
      "    arg 2 <Param>W{double, (2 3)} = (10.0 10.0 10.0 10.0 10.0 10.0)\n"
      "    out 0 h{double, (2 3)} = (10.0 11.0 12.0 13.0 14.0 15.0)\n"
      "[wfgen vm] forward 1/3 <WfInst[op=SCALE-CPU] : y <= op(y{double, (2 3)} h{double, (2 3)})>  ; "
      "y = 2.0 * h  (test.yaml:4:7)\n"
      "    arg 0 y{double, (2 3)} = (0.0 0.0 0.0 0.0 0.0 0.0)\n"
      "    arg 1 h{double, (2 3)} = (10.0 11.0 12.0 13.0 14.0 15.0)\n"
      "    out 0 y{double, (2 3)} = (20.0 22.0 24.0 26.0 28.0 30.0)\n"
      "[wfgen vm] forward 2/3 <WfInst[op=VIEW-T] : hT <= op(hT{double, (3 2)} h{double, (2 3)})>  ; "
      "return y, h.T  (test.yaml:5:7)\n"
      "    (view, nothing to run)\n";
  CHECK(log.str() == expected);
  check_elements(m.y, [](const rt::Shape& i) { return 2.0 * (10.0 + static_cast<double>(linear({2, 3}, i))); });

  // Fewer elements; strided views print in row-major order of their shape.
  log.str("");
  vm.set_logging_elements(3);
  vm.run(Section::Backward);
  CHECK(log.str().find("[wfgen vm] pullback 1/2 <WfInst[op=ADD-CPU] : dX <= op(dX{double, (2 3)} dX{double, (2 3)} "
                       "SV4BW(h{double, (2 3)}))>\n") != std::string::npos);
  CHECK(log.str().find("    arg 1 <Input>dy{double, (2 3)} = (4.0 4.0 4.0 ...)\n") != std::string::npos);
  CHECK(log.str().find("    out 0 dX{double, (2 3)} = (12.0 13.0 14.0 ...)\n") != std::string::npos);

  log.str("");
  vm.set_logging(nullptr);
  vm.run(Section::Forward);
  CHECK(log.str().empty());
}

TEST_CASE("vm disassembly has the disassemble-waffe2-ir layout", "[vm]") {
  Model m;
  rt::VM vm(kProgram);
  // Before prepare: dtypes and ranks from the operand specs.
  CHECK(vm.describe(Section::Forward, 0) ==
        "<WfInst[op=ADD-CPU] : h <= op(h{double, (? ?)} <Input>X{double, (? ?)} <Param>W{double, (? ?)})>");
  vm.prepare(m.table.data());
  const std::string golden =
      "disassemble-waffe2-ir:\n"
      " [Forward]: \n"
      "<WfInst[op=ADD-CPU]   : h <= op(h{double, (2 3)} <Input>X{double, (2 3)} <Param>W{double, (2 3)})>\n"
      "<WfInst[op=SCALE-CPU] : y <= op(y{double, (2 3)} h{double, (2 3)})>\n"
      "<WfInst[op=VIEW-T]    : hT <= op(hT{double, (3 2)} h{double, (2 3)})>\n"
      "\n"
      "3 Instructions | 5 Tensors | 1 Scalars\n"
      "\n"
      "\n"
      " [Pullback]: \n"
      "<WfInst[op=SCALE-CPU] : dX <= op(dX{double, (2 3)} <Input>dy{double, (2 3)})>\n"
      "<WfInst[op=ADD-CPU]   : dX <= op(dX{double, (2 3)} dX{double, (2 3)} SV4BW(h{double, (2 3)}))>\n"
      "\n"
      "2 Instructions | 3 Tensors | 1 Scalars\n"
      "\n"
      "\n";
  CHECK(vm.disassemble() == golden);
  REQUIRE_RT_ERROR(vm.describe(Section::Backward, 2), ErrorCode::OutOfBounds,
                   "VM::describe: instruction 2 of pullback, expected 0..1");

  // No pullback section without backward instructions; no specs: "?".
  rt::VM fwd_only(rt::Program{kTensors, kOperands, kScalars, kForward, {}, {}});
  CHECK(fwd_only.disassemble() ==
        "disassemble-waffe2-ir:\n"
        " [Forward]: \n"
        "<WfInst[op=ADD-CPU]   : h <= op(h{?, ?} <Input>X{?, ?} <Param>W{?, ?})>\n"
        "<WfInst[op=SCALE-CPU] : y <= op(y{?, ?} h{?, ?})>\n"
        "<WfInst[op=VIEW-T]    : hT <= op(hT{?, ?} h{?, ?})>\n"
        "\n"
        "3 Instructions | 5 Tensors | 1 Scalars\n"
        "\n"
        "\n");
}

TEST_CASE("vm profile has the benchmark-accept-instructions layout", "[vm]") {
  Model m;
  rt::VM vm(kProgram);
  vm.prepare(m.table.data());
  const std::string report = vm.profile(Section::Forward, 5);
  INFO(report);
  const auto lines = lines_of(report);
  REQUIRE(lines.size() == 15);
  CHECK(lines[0] == "[Sorted by Instructions]");
  CHECK(lines[1] == " Time(s)   |   Instruction ( * - Beyonds the average execution time)");
  const char* ops[] = {"ADD-CPU]   : h <= op(", "SCALE-CPU] : y <= op(", "VIEW-T]    : hT <= op("};
  int starred = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string& l = lines[2 + i];
    CHECK(l.find(std::string(" | <WfInst[op=") + ops[i]) == 10);
    const double t = std::strtod(l.c_str(), nullptr);
    CHECK(t >= 0.0);
    if (l.find('*') < 10) ++starred;
  }
  CHECK(starred >= 1);  // at least one instruction is beyond the average
  CHECK(lines[5].empty());
  CHECK(lines[6].rfind("3 Instructions | 5 Tensors | Overheads due to SV4BW(...) -> ", 0) == 0);
  CHECK(lines[7].empty());
  CHECK(lines[8].rfind(" Total Time: ", 0) == 0);
  CHECK(lines[8].size() > 17);
  CHECK(lines[8].substr(lines[8].size() - 4) == " sec");
  CHECK(lines[9].empty());
  CHECK(lines[10] == "[Sorted by topK]");
  CHECK(lines[11] == " Instruction" + std::string(9, ' ') + " | Total time (s) | Time/Total (n-sample=5)");
  double percent = 0;
  for (int i = 12; i < 15; ++i) {
    const std::string& l = lines[i];
    CHECK(l.rfind("<WfInst[op=", 0) == 0);
    CHECK(l.back() == '%');
    percent += std::strtod(l.c_str() + l.rfind("| ") + 2, nullptr);
  }
  // Only the two kernels take time; the view-only instruction has none.
  CHECK(percent == Approx(100.0).margin(0.01));

  // top_k cuts the table; the pullback lists the SV4BW overhead of
  // instructions that write a saved operand (none here).
  const auto top1 = lines_of(vm.profile(Section::Backward, 3, 1));
  REQUIRE(top1.size() == 12);
  CHECK(top1[5] == "2 Instructions | 3 Tensors | Overheads due to SV4BW(...) -> 0.0(s) ");
  CHECK(top1[10].find("| Time/Total (n-sample=3)") != std::string::npos);
  check_elements(m.dx, [](const rt::Shape& i) { return 2.0 + 10.0 + static_cast<double>(linear({2, 3}, i)); });
}

// Not run by default: `test_runtime "[.vm-bench]"` prints the cost of one
// instruction (an indirect call of an empty kernel) as run() executes it.
TEST_CASE("vm per-instruction overhead", "[.vm-bench]") {
  constexpr int kInstructions = 1000, kRuns = 20000;
  const rt::TensorInfo tensors[] = {{"a", TensorRole::Temp}, {"b", TensorRole::Temp}};
  std::vector<std::int32_t> operands;
  std::vector<Instruction> iseq;
  for (int i = 0; i < kInstructions; ++i) {
    operands.push_back(i % 2);
    operands.push_back(1 - i % 2);
    iseq.push_back({"NOOP", "noop", &noop, 2 * i, 2, 0b1, 0, 0, 0, nullptr});
  }
  rt::VM vm(rt::Program{tensors, operands, {}, iseq, {}, {}});
  Tensor a = Tensor::zeros(DType::f32, {4}), b = Tensor::zeros(DType::f32, {4});
  TensorRef table[] = {a.ref(), b.ref()};
  vm.prepare(table);
  for (OptLevel level : {OptLevel::Fast, OptLevel::Checked, OptLevel::Safe}) {
    vm.set_opt_level(level);
    vm.run(Section::Forward);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < kRuns; ++r) vm.run(Section::Forward);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("opt level %d: %.2f ns per instruction (%d instructions x %d runs)\n", static_cast<int>(level),
                ns / (double(kInstructions) * kRuns), kInstructions, kRuns);
  }
}

// Not run by default: prints the outputs shown in docs/runtime-vm.md.
TEST_CASE("vm demo output", "[.vm-demo]") {
  Model m;
  rt::VM vm(kProgram);
  vm.prepare(m.table.data());
  std::cout << vm.disassemble() << "----\n";
  vm.set_logging(&std::cout);
  vm.run(Section::Forward);
  vm.set_logging(nullptr);
  std::cout << "----\n" << vm.profile(Section::Forward, 100) << "----\n";
  m.w = Tensor::full(DType::f32, {2, 3}, 1.0);
  m.fill();
  vm.prepare(m.table.data());
  try {
    vm.run(Section::Forward);
  } catch (const rt::Error& e) {
    std::cout << e.what() << "\n";
  }
}
