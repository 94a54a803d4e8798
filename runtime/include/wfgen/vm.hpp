// The instruction-sequence VM that generated model files run on, in the
// spirit of cl-waffe2's VM (WfInstruction, accept-instructions,
// disassemble-waffe2-ir, benchmark-accept-instructions, *opt-level*,
// *logging-vm-execution*). docs/runtime-vm.md shows every output format.
//
// A generated model is data: a tensor table (every tensor of the traced
// graph: inputs, parameters, arena temporaries and views of them, as
// TensorRef descriptors the model fills in when shapes are known) and
// instruction sequences over it. One instruction is
//
//   out_to... <- op(args...)
//
// a type-erased kernel called on some entries of the tensor table. The VM
// gathers each instruction's operands into one contiguous TensorRef array
// when the model is prepared (prepare()), so executing an instruction is a
// single indirect call: a few nanoseconds of overhead.
//
// How a generated model uses it:
//
//   static const TensorInfo kTensors[] = {{"X", TensorRole::Input}, {"W1", TensorRole::Param},
//                                         {"h", TensorRole::Temp}};
//   static const std::int32_t kOperands[] = {2, 0, 1};          // h <= matmul(X, W1)
//   static const OperandSpec kSpecs[] = {{DType::f32, 2, -1}, {DType::f32, 2, -1},
//                                        {DType::f32, 2, -1}};
//   static const Instruction kForward[] = {
//       {"MATMUL-CPU", "matmul_cpu_f32_r2", &matmul_cpu_f32_r2, 0, 3, 0b001, 0, 0, 0,
//        "h = X @ W1  (mlp.yaml:14:7)"}};
//   static const Program kProgram{kTensors, kOperands, {}, kForward, {}, kSpecs};
//
//   std::vector<TensorRef> table(3);     // filled by the model: X, W1, arena slice for h
//   VM vm(kProgram);
//   vm.prepare(table.data());            // again whenever a TensorRef of the table changes
//   vm.run(Section::Forward);
//
// Views: the VM never computes views. The model writes view descriptors
// (transposes, broadcasts, slices) into the table before prepare(); an
// instruction that only stands for a view in the listing has fn == nullptr
// and is skipped by run().
//
// Threads: a VM holds mutable state (the gathered operands, check flags,
// logging stream), so use one VM per thread; copies of a VM share that state
// (VM is a handle). Kernels may use parallel_for inside.
#pragma once

#include <cstdint>
#include <exception>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "wfgen/kernel_support.hpp"
#include "wfgen/runtime.hpp"

namespace wfgen::rt {

// Where a tensor of the table comes from (for disassembly: <Input>, <Param>).
enum class TensorRole : std::uint8_t { Input, Param, Temp, View, Grad, State };

struct TensorInfo {
  const char* name;  // "TID3"-style id or the spec name ("X", "W1", "h")
  TensorRole role;
};

// At most this many operands per instruction (written/saved are bit masks).
inline constexpr int kMaxOperands = 32;

struct Instruction {
  const char* op;        // display name, e.g. "MATMUL-BLAS", "ADD-CPU", "SV4BW-COPY"
  const char* kernel;    // generated kernel name, e.g. "matmul_blas_f32_r2"
  KernelFn fn;           // null for instructions that only rebind views
  std::int32_t first_operand;  // into Program::operands
  std::int16_t n_operands;
  std::uint32_t written;       // bit k set: operand k is written (the out_to)
  std::uint32_t saved;         // bit k set: operand k is a save-for-backward copy (shown as SV4BW(...))
  std::int32_t first_scalar;   // into Program::scalars
  std::int16_t n_scalars;
  const char* source;    // the body line it came from: "h = relu(X @ W1 + b1)  (mlp.yaml:14:7)"; may be null
};

// What the checks of opt levels 1 and 2 expect of one operand. Parallel to
// Program::operands: operand_specs[i] describes operands[i].
struct OperandSpec {
  // Flags.
  static constexpr std::uint8_t kAnyDType = 1;  // do not check dtype
  // A written operand that may overlap other operands of the instruction in
  // any way (the kernel copes, e.g. it works through a temporary).
  static constexpr std::uint8_t kMayAlias = 2;
  // A written operand that must not overlap any other operand at all, not
  // even as the identical view (GEMM output, gather destination).
  static constexpr std::uint8_t kNoAlias = 4;
  // A written operand that is a result of the model, which no later
  // instruction reads: the kernel may write it with streaming stores from
  // streaming_result_bytes() on, instead of streaming_store_bytes()
  // (runtime.hpp).
  static constexpr std::uint8_t kResult = 8;

  DType dtype;         // expected element type (the kernel's)
  std::int8_t rank;    // expected rank; -1: any
  // Element-wise group: operands of one instruction with the same group >= 0
  // must have equal shapes (broadcasts are views of the full shape); -1: none.
  std::int16_t group;
  std::uint8_t flags = 0;
};

struct Program {
  std::span<const TensorInfo> tensors;      // the tensor table's names and roles
  std::span<const std::int32_t> operands;   // tensor ids, per instruction
  std::span<const ScalarArg> scalars;
  std::span<const Instruction> forward;
  std::span<const Instruction> backward;    // empty without a pullback
  // Empty, or one entry per operands[i]: expected dtype, rank and element-wise
  // group. Without specs the checks cover only null data, broadcast outputs
  // and aliasing.
  std::span<const OperandSpec> operand_specs;
  // The pullback of the first backward() after zero_grad(), which the model
  // runs instead of `backward` (Section::FreshBackward): the same
  // instructions and operands, except that a gradient's GEMM stores its
  // product (beta 0) instead of adding it into the buffer, so zero_grad()
  // needs no pass over the gradients (with_kernels() below makes it).
  // Empty: the same as `backward`.
  std::span<const Instruction> backward_fresh = {};
};

enum class Section { Forward, Backward, FreshBackward };

// An instruction of Program::backward_fresh that calls another kernel than
// the pullback's instruction `index` (on the same operands and scalars).
struct KernelSwap {
  std::int32_t index;
  const char* op;      // "MATMUL-BLAS"
  const char* kernel;  // "matmul_blas_f32_r2"
  KernelFn fn;
};

// `iseq` with the kernels of `swaps` (indices into it) swapped in: how a
// generated model makes its Program::backward_fresh from its pullback.
// Throws Error(InvalidArgument) for an index out of range.
std::vector<Instruction> with_kernels(std::span<const Instruction> iseq, std::span<const KernelSwap> swaps);

// *opt-level*: 1 checks every instruction at every call, 2 only at the first
// call of each section after prepare(), 3 never. The checks run for a whole
// section before its first instruction executes:
//  - every operand has data (unless it has no elements), rank 0..kMaxRank,
//    sizes >= 0;
//  - dtype and rank as operand_specs says, equal shapes within an
//    element-wise group;
//  - a written operand of a kernel (fn != null) is not a broadcast view
//    (stride 0 on an axis of size > 1), and does not overlap a read operand
//    unless it is the identical view (in-place: h <= op(h x)); kNoAlias and
//    kMayAlias tighten or lift that.
// The default is 2, or WFGEN_VM_OPT_LEVEL=1|2|3 from the environment.
// Whatever the level, prepare() checks aliasing of kNoAlias outputs and
// operand extents (see prepare()).
enum class OptLevel : int { Safe = 1, Checked = 2, Fast = 3 };

// What run() throws when a check fails or a kernel throws: an Error whose
// message starts with the instruction and its source line, e.g.
//   instruction 3 <WfInst[op=ADD-CPU] : h <= op(h{float, (2 3)} <Param>b1{double, (2 3)})>
//   (h = relu(X @ W1 + b1)  (mlp.yaml:14:7)): operand 1 (b1) has dtype f64, expected f32
// (one line). The code is the check's, or the kernel's Error code (std::bad_alloc:
// OutOfMemory, other exceptions: InvalidArgument); cause() holds the kernel's
// original exception.
class InstructionError : public Error {
 public:
  InstructionError(ErrorCode code, const std::string& message, Section section, std::int32_t index,
                   std::exception_ptr cause);
  Section section() const noexcept { return section_; }
  std::int32_t instruction() const noexcept { return index_; }
  const std::exception_ptr& cause() const noexcept { return cause_; }

 private:
  Section section_;
  std::int32_t index_;
  std::exception_ptr cause_;
};

class VM {
 public:
  // Validates the program (operand, tensor and scalar indices in range,
  // n_operands <= kMaxOperands, operand_specs empty or parallel to operands);
  // throws Error(InvalidArgument) otherwise. `program` and the arrays it
  // spans must outlive the VM.
  explicit VM(const Program& program);

  void set_opt_level(OptLevel level);
  OptLevel opt_level() const;
  // *logging-vm-execution*: print each instruction with its arguments before
  // and its results after it runs (name, dtype, shape, first elements) to
  // `out`; null turns it off. WFGEN_LOG_VM=1 in the environment turns it on
  // (to std::cerr) for every new VM.
  void set_logging(std::ostream* out);
  // Elements shown per operand in the log (default 6).
  void set_logging_elements(int n);

  // Gathers operands from the tensor table (one TensorRef per entry of
  // program.tensors); call again whenever the table changes (new input
  // shapes, new arena). Resets the "first call" of opt level 2.
  //
  // At every opt level (3 included) prepare() checks, once per table, that
  // each written operand flagged OperandSpec::kNoAlias (GEMM, reduce, builtin
  // and C++ kernels in generated models) does not overlap any other operand
  // of its instruction (AliasedBuffer), and that no operand spans more bytes
  // than the address space holds (SizeOverflow); it throws InstructionError
  // (an rt::Error) naming the instruction, and the VM stays unprepared.
  void prepare(const TensorRef* table);
  // prepare() that returns the first failed check as a Status instead (its
  // message as InstructionError's). With `check_all`, it also runs every
  // check of opt levels 1 and 2 on both sections now (level 2 then skips them
  // at the first run()): what the try_ entry points of generated models use
  // to validate everything before running.
  Status try_prepare(const TensorRef* table, bool check_all = true);
  bool prepared() const;

  // Runs a section. Throws InstructionError (with the instruction and its
  // source line) when a check fails or a kernel throws, Error(InvalidArgument)
  // before prepare().
  void run(Section section);

  // The layout of disassemble-waffe2-ir, dtypes and shapes from the table of
  // the last prepare() (before it: dtype from operand_specs, "?" sizes):
  // disassemble-waffe2-ir:
  //  [Forward]:
  // <WfInst[op=ADD-CPU]    : TID3 <= op(TID3{float, (3 3)} <Param>TID1{float, (3 3)})>
  // ...
  //
  // N Instructions | N Tensors | N Scalars
  // and [Pullback]: likewise when there is a backward section, and
  // [Pullback after zero_grad()]: when the program has backward_fresh.
  std::string disassemble() const;
  // One instruction, unaligned: "<WfInst[op=ADD-CPU] : TID3 <= op(...)>".
  std::string describe(Section section, std::size_t index) const;

  // benchmark-accept-instructions: checks as the opt level says, runs the
  // section n_sample times timing each instruction (steady_clock), then
  // prints "[Sorted by Instructions]" (mean time per instruction, '*' beyond
  // the average), the total time of one run, and "[Sorted by topK]" (the
  // top_k ops by total time, with their share of the total).
  std::string profile(Section section, int n_sample, int top_k = 10);

  const Program& program() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace wfgen::rt
