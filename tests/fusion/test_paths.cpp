// The graph after rewriting: the spec's paths (symbolic paths, bypasses,
// fusion paths) and automatic fusion, checked on the traced graph in-process,
// and the CMakeLists.txt's list of generated files.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "tests/listed_outputs.hpp"
#include "wfgen/cli/commands.hpp"

namespace fs = std::filesystem;

namespace {

// `wfgen disasm` of one build of a spec given as text.
std::string disasm(const std::string& yaml, const std::string& build, bool no_fuse = false, int* code = nullptr) {
  const fs::path dir = fs::temp_directory_path() / "wfgen_test_paths";
  fs::create_directories(dir);
  const fs::path file = dir / (std::to_string(::getpid()) + "_" + build + (no_fuse ? "_nofuse" : "") + ".yaml");
  {
    std::ofstream(file) << yaml;
  }
  std::ostringstream out, err;
  wfgen::cli::DisasmOptions o;
  o.specs = {file};
  o.build = build;
  o.no_fuse = no_fuse;
  int rc = wfgen::cli::disasm(o, {out, err, false});
  if (code) *code = rc;
  return out.str() + err.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("the generated-file list of tests/fusion/CMakeLists.txt is what wfgen generates") {
  std::set<std::string> present;
  for (const char* f : {WFGEN_FUSION_FILES}) present.insert(f);
  CHECK(wfgen::test::listed_outputs({fs::path(WFGEN_TEST_DATA) / "fusion.yaml"}, WFGEN_FUSION_GEN, "fz") == present);
}

TEST_CASE("the reference's Softmax-Model has fewer instructions with fusion than without") {
  const std::string spec = R"Y(
models:
  - name: softmax_model
    where: "X[~ N C] -> Y[~ N C]"
    call: |
      z = X - max(X, axis=-1, keepdims=true)
      e = exp(z)
      return e / sum(e, axis=-1, keepdims=true)
  - name: sm
    where: "X[B N C] -> Y[B N C]"
    call: |
      return softmax_model(X)
builds:
  - {name: sm, model: sm}
  - {name: sm_off, model: sm, fuse: false}
)Y";
  const std::string fused = disasm(spec, "sm"), plain = disasm(spec, "sm", true), off = disasm(spec, "sm_off");
  CHECK(count(plain, "<WfInst") == 5);
  CHECK(count(off, "<WfInst") == 5);
  CHECK(count(fused, "<WfInst") == 1);
  CHECK(count(fused, "FUSED-SOFTMAX-MODEL-CPU") == 1);
}

namespace {

// `wfgen explain` of a spec given as text: its output, or its errors.
std::string explain(const std::string& yaml, const std::string& build, int* code = nullptr) {
  const fs::path dir = fs::temp_directory_path() / "wfgen_test_paths";
  fs::create_directories(dir);
  // ctest runs test cases in parallel processes: one folder each.
  static int calls = 0;
  const fs::path sub = dir / (std::to_string(::getpid()) + "_" + std::to_string(calls++));
  fs::create_directories(sub);
  const fs::path file = sub / "paths.yaml";
  {
    std::ofstream(file) << yaml;
  }
  std::ostringstream out, err;
  wfgen::cli::ExplainOptions o;
  o.specs = {file};
  o.build = build;
  int rc = wfgen::cli::explain(o, {out, err, false});
  if (code) *code = rc;
  return out.str() + err.str();
}

const char* kNodes = R"Y(
nodes:
  - {name: fma_a, where: "A[~] B[~] C[~] OUT[~] -> OUT[~]"}
  - {name: fma_b, where: "A[~] B[~] C[~] OUT[~] -> OUT[~]"}
  - {name: act, where: "X[~] OUT[~] -> OUT[~]"}
  - {name: act_fast, where: "X[~] OUT[~] -> OUT[~]"}
  - {name: act2, args: {k: {type: int, default: 1}}, where: "X[~] OUT[~] -> OUT[~]"}
  - {name: mul1, where: "A[~] B[~] OUT[~] -> OUT[~]"}
impls:
  - {node: mul1, device: cpu, dtypes: [f32], elementwise: "A * B + 1"}
  - {node: fma_a, device: cpu, dtypes: [f32], elementwise: "A * B + C"}
  - {node: fma_b, device: cpu, dtypes: [f32], elementwise: "A * B + C"}
  - {node: act, device: cpu, dtypes: [f32], elementwise: "tanh(X)"}
  - {node: act_fast, device: cpu, dtypes: [f32], elementwise: "tanh(X)"}
  - {node: act2, device: cpu, dtypes: [f32], elementwise: "tanh(X)"}
)Y";

const char* kModel = R"Y(
models:
  - name: m
    where: "A[N C] B[N C] C[N C] -> Y[N C]"
    call: |
      y = act(A * B + C)
      return act(y * B + C) + exp(A * C + 1)
builds:
  - {name: b, model: m}
)Y";

// explain() of kNodes, these path entries (lines of a `paths:` list) and kModel.
std::string explain_paths(const std::string& entries, int* code = nullptr) {
  return explain(std::string(kNodes) + "\npaths:\n" + entries + kModel, "b", code);
}

}  // namespace

TEST_CASE("fusion paths: registered first wins") {
  const std::string a = explain_paths(R"Y(  - {name: to_a, fuse: [{node: mul}, {node: add}], into: fma_a}
  - {name: to_b, fuse: [{node: mul}, {node: add}], into: fma_b}
)Y");
  CHECK(count(a, "path 'to_a'") == 2);
  CHECK(count(a, "path 'to_b'") == 0);
  const std::string b = explain_paths(R"Y(  - {name: to_b, fuse: [{node: mul}, {node: add}], into: fma_b}
  - {name: to_a, fuse: [{node: mul}, {node: add}], into: fma_a}
)Y");
  CHECK(count(b, "path 'to_b'") == 2);
  CHECK(count(b, "path 'to_a'") == 0);
}

TEST_CASE("paths repeat until nothing matches, and a later path can match what an earlier one made") {
  const std::string out = explain_paths(R"Y(  - {name: fast, bypass: {node: act, with: act_fast}}
  - {name: fma, fuse: [{node: mul}, {node: add}, {node: act_fast}], into: fma_a}
)Y");
  // Both act calls are bypassed, then both mul-add-act_fast chains fused
  // (the path fires once per chain); exp(A * C + 1) has add_scalar, not add.
  CHECK(count(out, "path 'fast'") == 2);
  CHECK(count(out, "act -> act_fast") == 2);
  CHECK(count(out, "path 'fma'") == 2);
  CHECK(count(out, "act_fast -> fma_a") == 2);
}

TEST_CASE("a partial match is not replaced") {
  const std::string out = explain_paths(R"Y(  - {name: whole, fuse: [{node: mul}, {node: add}, {node: exp}], into: fma_a}
)Y");
  // mul -> add -> act and mul -> add_scalar -> exp: neither matches all three queries.
  CHECK(count(out, "path 'whole'") == 0);
}

TEST_CASE("queries match subtypes, dtypes and conditions on arguments") {
  const std::string spec = std::string(kNodes) + R"Y(
paths:
  - {name: binary_then, fuse: [{node: binary, dtypes: [f32, f32]}, {node: add_scalar, when: "value == 1"}], into: mul1}
  - {name: act2_big, fuse: [{node: act2, when: "k > 2 && rank == 2"}], into: act}
models:
  - name: m
    where: "A[N C] C[N C] -> Y[N C] Z[N C] W[N C]"
    call: |
      return exp(A * C + 1), A * C + 2, act2(act2(A, k=3), k=1)
builds:
  - {name: b, model: m}
)Y";
  int code = -1;
  const std::string out = explain(spec, "b", &code);
  INFO(out);
  CHECK(code == 0);
  CHECK(count(out, "path 'act2_big'") == 1);  // k=3 only
  CHECK(count(out, "path 'binary_then'") == 1);  // A * C + 1, not A * C + 2
}

TEST_CASE("paths are checked when loaded: errors point at the path") {
  // Path entries, and what the error must say.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"  - {name: bad, bypass: {node: act, with: act2}}\n",
       {"paths.yaml:18:", ": error: path 'bad': 'act2'", "does not take the same tensors and arguments"}},
      {"  - {name: shrink, pattern: \"sum(x, axis=-1, keepdims=true)\", replace: \"x\"}\n",
       {"the replacement of path 'shrink' gives shape (n n) where its pattern gives (n 1)"}},
      {"  - {name: typo, fuse: [{node: mull}], into: act}\n", {"path 'typo': the queried node 'mull' is not a node"}},
      {"  - {name: arity, fuse: [{node: mul}, {node: add}], into: act}\n",
       {"the chain reads 3 tensors besides its own results, but 'act'"}},
      {"  - {name: broken, pattern: \"log(x +\", replace: \"x\"}\n", {"in the pattern of path 'broken'"}},
      {"  - {name: stranger, pattern: \"exp(x)\", replace: \"y\"}\n", {"uses 'y', which is not a variable of its pattern"}},
      {"  - {name: both, pattern: \"exp(x)\", replace: \"x\", bypass: {node: act, with: act_fast}}\n", {"must be one of"}},
      {"  - {name: loop1, bypass: {node: act, with: act_fast}}\n  - {name: loop2, bypass: {node: act_fast, with: act}}\n",
       {"undo each other"}},
      {"  - {name: cond, fuse: [{node: act2, when: \"k > 2 and rank\"}], into: act}\n",
       {"paths.yaml:18:", "in 'when' of path 'cond'"}},
  };
  for (const auto& [entries, expected] : cases) {
    int code = 0;
    const std::string out = explain_paths(entries, &code);
    INFO(entries << out);
    CHECK(code == 2);
    for (const auto& e : expected) CHECK(out.find(e) != std::string::npos);
  }
}

TEST_CASE("symbolic paths: the rewrites of the issue, and a device guard") {
  const std::string spec = R"Y(
paths:
  - {name: log1p, pattern: "log(x + 1)", replace: "log1p(x)"}
  - {name: log_exp, pattern: "log(exp(x))", replace: "x"}
  - {name: div_self, pattern: "x / x", replace: "x * 0 + 1"}
  - {name: neg_neg, pattern: "-(-x)", replace: "x"}
  - {name: elsewhere, pattern: "sqrt(x)", replace: "x", device: blas}
models:
  - name: m
    where: "A[N C] B[N C] -> Y[N C]"
    call: |
      return log(1 + A) + log(exp(B)) + A / A + -(-B) + sqrt(A) + B / A
builds:
  - {name: b, model: m}
)Y";
  int code = -1;
  const std::string out = explain(spec, "b", &code);
  INFO(out);
  CHECK(code == 0);
  CHECK(count(out, "path 'log1p'") == 1);
  CHECK(count(out, "path 'log_exp'") == 1);
  CHECK(count(out, "path 'div_self'") == 1);  // B / A is not x / x
  CHECK(count(out, "path 'neg_neg'") == 1);
  CHECK(count(out, "path 'elsewhere'") == 0);  // sqrt runs on cpu
}

TEST_CASE("choose-gemms: small products of known shape run wfgen's GEMM, the rest OpenBLAS's") {
  // The rule is rt::own_gemm_is_faster: K <= 256 and <= 2^24 multiply-adds,
  // or N = 48 q + t (t <= 4, 32-column panels padding 8 or more) with 64 rows.
  auto spec = [](const std::string& where, const std::string& devices) {
    return "models:\n  - name: m\n    where: \"" + where + "\"\n    call: |\n      return A @ B\nbuilds:\n  - {name: b, model: m, devices: [" +
           devices + "]}\n";
  };
  auto ops = [](const std::string& out) {
    return std::make_pair(count(out, "op=MATMUL-CPU]"), count(out, "op=MATMUL-BLAS]"));
  };
  int code = -1;
  SECTION("known and small: cpu, said by explain") {
    const std::string out = explain(spec("A[8 16] B[16 4] -> Y[8 4]", "blas, cpu"), "b", &code);
    INFO(out);
    CHECK(code == 0);
    CHECK(count(out, "matmul (8x16 by 16x4) runs wfgen's GEMM (cpu), not OpenBLAS") == 1);
    CHECK(ops(out) == std::make_pair(2, 0));  // in the disassembly without and with the rewrites
  }
  SECTION("a long K stays with OpenBLAS") {
    const std::string out = explain(spec("A[8 257] B[257 4] -> Y[8 4]", "blas, cpu"), "b", &code);
    INFO(out);
    CHECK(ops(out) == std::make_pair(0, 2));
  }
  SECTION("more than 2^24 multiply-adds stay with OpenBLAS") {
    const std::string out = explain(spec("A[1025 256] B[256 64] -> Y[1025 64]", "blas, cpu"), "b", &code);
    INFO(out);
    CHECK(ops(out) == std::make_pair(0, 2));
  }
  SECTION("N of whole 48-column panels and at most 4 more, 64 rows or more: cpu at any K, said by explain") {
    std::string out = explain(spec("A[64 300] B[300 49] -> Y[64 49]", "blas, cpu"), "b", &code);
    INFO(out);
    CHECK(code == 0);
    CHECK(count(out, "matmul (64x300 by 300x49) runs wfgen's GEMM (cpu), not OpenBLAS: N is whole panels of 48 columns") == 1);
    CHECK(ops(out) == std::make_pair(2, 0));
    out = explain(spec("A[64 300] B[300 64] -> Y[64 64]", "blas, cpu"), "b", &code);  // 64: whole 32-column panels
    CHECK(ops(out) == std::make_pair(0, 2));
    out = explain(spec("A[63 300] B[300 49] -> Y[63 49]", "blas, cpu"), "b", &code);  // too few rows
    CHECK(ops(out) == std::make_pair(0, 2));
  }
  SECTION("rows known only at run time: the blas kernel decides then") {
    const std::string out = explain(spec("A[N 16] B[16 4] -> Y[N 4]", "blas, cpu"), "b", &code);
    INFO(out);
    CHECK(ops(out) == std::make_pair(0, 2));
  }
  SECTION("a batch over its own B: one matrix's rows count, the batch may be symbolic") {
    const std::string out = explain(spec("A[N 8 16] B[N 16 4] -> Y[N 8 4]", "blas, cpu"), "b", &code);
    INFO(out);
    CHECK(ops(out) == std::make_pair(2, 0));
  }
  SECTION("a B shared by the batch: the batch folds into the rows, so it must be known and small") {
    std::string out = explain(spec("A[N 8 16] B[16 4] -> Y[N 8 4]", "blas, cpu"), "b", &code);
    CHECK(ops(out) == std::make_pair(0, 2));
    out = explain(spec("A[4 8 16] B[16 4] -> Y[4 8 4]", "blas, cpu"), "b", &code);
    INFO(out);
    CHECK(count(out, "matmul (8x16 by 16x4 (32 rows with the batch))") == 1);
    CHECK(ops(out) == std::make_pair(2, 0));
    out = explain(spec("A[4096 8 256] B[256 4] -> Y[4096 8 4]", "blas, cpu"), "b", &code);  // 2^25 folded
    CHECK(ops(out) == std::make_pair(0, 2));
  }
  SECTION("a build without the cpu device keeps OpenBLAS") {
    const std::string out = explain(spec("A[8 16] B[16 4] -> Y[8 4]", "blas"), "b", &code);
    INFO(out);
    CHECK(ops(out) == std::make_pair(0, 2));
  }
}

// A builtin whose impl has fuse_epilogue (depthwise_conv2d) takes the
// element-wise chain that alone reads its output as its epilogue, when the
// chain's other operands are constant over each output plane: MobileNet's
// bias + Clip(0, 6) as the importer writes it. Not when the output is read
// elsewhere (a result of the model), nor with an operand that varies over
// the plane; in a training build, only as far as the pullback lets the
// chain go (gelu's backward reads the pre-activation, which stays stored).
TEST_CASE("depthwise_conv2d takes the chain that alone reads its output as its epilogue, and only then") {
  const std::string spec = R"Y(
models:
  - name: dw_clip
    where: "X[2 4 9 9] F[4 3 3] b[4 1 1] -> Y[2 4 9 9]"
    call: |
      y = depthwise_conv2d(X, F, k_h=3, k_w=3, pad_h=1, pad_w=1).reshape(2, 4, 81).reshape(2, 4, 9, 9) + b
      return relu(y - relu(y - 6.0))
  - name: dw_twice
    where: "X[2 4 9 9] F[4 3 3] b[4 1 1] -> Y[2 4 9 9] Z[2 4 9 9]"
    call: |
      d = depthwise_conv2d(X, F, k_h=3, k_w=3, pad_h=1, pad_w=1)
      return relu(d + b), d
  - name: dw_full
    where: "X[2 4 9 9] F[4 3 3] B[2 4 9 9] -> Y[2 4 9 9]"
    call: |
      return relu(depthwise_conv2d(X, F, k_h=3, k_w=3, pad_h=1, pad_w=1) + B)
  - name: dw_row
    where: "X[2 4 9 9] F[4 3 3] b[9] -> Y[2 4 9 9]"
    call: |
      return relu(depthwise_conv2d(X, F, k_h=3, k_w=3, pad_h=1, pad_w=1) + b)
  - name: dw_train
    params: {F: {shape: [4, 3, 3], init: {uniform: [-1, 1]}}, b: {shape: [4, 1, 1]}}
    where: "X[2 4 9 9] -> Y[2 4 9 9]"
    call: |
      return gelu(depthwise_conv2d(X, F, k_h=3, k_w=3, pad_h=1, pad_w=1) + b)
builds:
  - {name: dw_clip, model: dw_clip}
  - {name: dw_twice, model: dw_twice}
  - {name: dw_full, model: dw_full}
  - {name: dw_row, model: dw_row}
  - {name: dw_train, model: dw_train, backward: true}
)Y";
  const std::string clip = disasm(spec, "dw_clip");
  INFO(clip);
  CHECK(count(clip, "<WfInst") == 1);
  CHECK(count(clip, "op=FUSED-DEPTHWISE-CONV2D-ADD-SUB-SCALAR-RELU-AND-2-CPU") == 1);
  CHECK(count(disasm(spec, "dw_clip", true), "op=DEPTHWISE-CONV2D-CPU") == 1);  // --no-fuse
  for (const char* build : {"dw_twice", "dw_full", "dw_row"}) {
    const std::string text = disasm(spec, build);
    INFO(text);
    CHECK(count(text, "op=DEPTHWISE-CONV2D-CPU") == 1);
    CHECK(count(text, "op=FUSED-DEPTHWISE") == 0);
  }
  const std::string train = disasm(spec, "dw_train");
  INFO(train);
  CHECK(count(train, "op=FUSED-DEPTHWISE-CONV2D-ADD-CPU") == 1);
  CHECK(count(train, "op=GELU-CPU") == 1);
  CHECK(count(train, "op=DEPTHWISE-CONV2D-CPU") == 0);
}

// matmul's impls (cpu and blas) have fuse_epilogue: the element-wise chain
// that alone reads a product becomes the GEMM's epilogue, whatever its
// other operands vary along (a bias per column, per row, a full tensor, a
// scalar). Not when the product is read elsewhere; in a training build only
// as far as the pullback lets the chain go; the blas impl keeps its device
// (a product too large for wfgen's GEMM at build time).
TEST_CASE("matmul takes the element-wise chain that alone reads its product as its epilogue, and only then") {
  const std::string spec = R"Y(
models:
  - name: mm_gelu
    where: "X[2 5 7] W[7 9] b[9] -> Y[2 5 9]"
    call: |
      return gelu(X @ W + b)
  - name: mm_mixed
    where: "X[5 7] W[7 9] r[5 1] R[5 9] -> Y[5 9]"
    call: |
      return relu((X @ W) * r + R - 6.0)
  - name: mm_twice
    where: "X[5 7] W[7 9] b[9] -> Y[5 9] Z[5 9]"
    call: |
      y = X @ W
      return relu(y + b), y
  - name: mm_big
    where: "X[300 300] W[300 300] b[300] -> Y[300 300]"
    call: |
      return relu(X @ W + b)
  - name: mm_train
    params: {W: {shape: [7, 9], init: {uniform: [-1, 1]}}, b: {shape: [9]}}
    where: "X[5 7] -> Y[5 9]"
    call: |
      return gelu(X @ W + b)
builds:
  - {name: mm_gelu, model: mm_gelu}
  - {name: mm_mixed, model: mm_mixed}
  - {name: mm_twice, model: mm_twice}
  - {name: mm_big, model: mm_big, devices: [blas, cpu]}
  - {name: mm_train, model: mm_train, backward: true}
)Y";
  const std::string gelu = disasm(spec, "mm_gelu");
  INFO(gelu);
  CHECK(count(gelu, "<WfInst") == 1);
  CHECK(count(gelu, "op=FUSED-MATMUL-ADD-GELU-CPU") == 1);
  CHECK(count(disasm(spec, "mm_gelu", true), "op=MATMUL-CPU") == 1);  // --no-fuse
  const std::string mixed = disasm(spec, "mm_mixed");
  INFO(mixed);
  CHECK(count(mixed, "<WfInst") == 1);
  CHECK(count(mixed, "op=FUSED-MATMUL-MUL-ADD-SUB-SCALAR-AND-1-CPU") == 1);
  const std::string twice = disasm(spec, "mm_twice");
  INFO(twice);
  CHECK(count(twice, "op=MATMUL-CPU") == 1);
  CHECK(count(twice, "op=FUSED-MATMUL") == 0);
  const std::string big = disasm(spec, "mm_big");
  INFO(big);
  CHECK(count(big, "<WfInst") == 1);
  CHECK(count(big, "op=FUSED-MATMUL-ADD-RELU-BLAS") == 1);
  const std::string train = disasm(spec, "mm_train");
  INFO(train);
  CHECK(count(train, "op=FUSED-MATMUL-ADD-CPU") == 1);
  CHECK(count(train, "op=GELU-CPU") == 1);
  CHECK(count(train, "op=MATMUL-ACC-CPU") == 1);  // the pullback's product
}

// An imported 1 x 1 convolution is a GEMM of [N Cout H*W], a reshape to
// [N Cout H W] (N known or not), then its bias per channel and a Clip (or the residual sum)
// on the image shape: the chain moves into the product's shape through the
// reshape (the bias over H and W merges into a bias over H*W) and becomes
// the GEMM's epilogue (the chain read by the next convolution, as in
// MobileNetV2; an output stays where it is). Not when the reshape does not keep the chain's
// operands expressible in the product's axes (a [7 36] product viewed as
// [42 6] with a bias per row of it; a bias per image row H), nor when the
// product is read elsewhere.
TEST_CASE("a convolution's GEMM takes its bias and Clip as its epilogue through the reshape to the image shape, and only then") {
  const std::string spec = R"Y(
models:
  - name: pw_clip
    where: "X[2 5 6 6] W[7 5] B[7] V[3 7] -> Y[2 3 36]"
    call: |
      t = (W @ X.reshape(-1, 5, 36)).reshape(2, 7, 6, 6) + B.reshape(7, 1, 1)
      return V @ (relu(t - relu(t - 6.0) - 0.0) + 0.0).reshape(-1, 7, 36)
  - name: pw_clip_batch
    where: "X[N 5 6 6] W[7 5] B[7] V[3 7] -> Y[N 3 36]"
    call: |
      t = (W @ X.reshape(-1, 5, 36)).reshape(-1, 7, 6, 6) + B.reshape(7, 1, 1)
      return V @ (relu(t - relu(t - 6.0) - 0.0) + 0.0).reshape(-1, 7, 36)
  - name: pw_residual
    where: "X[1 5 6 6] W[5 5] B[5] V[3 5] -> Y[1 3 36]"
    call: |
      t = (W @ X.reshape(-1, 5, 36)).reshape(1, 5, 6, 6) + B.reshape(5, 1, 1)
      return V @ (X + t).reshape(-1, 5, 36)
  - name: pw_rows_split
    where: "X[1 5 6 6] W[7 5] B[42] -> Y[1 42 6]"
    call: |
      return relu((W @ X.reshape(-1, 5, 36)).reshape(1, 42, 6) + B.reshape(42, 1))
  - name: pw_bias_per_h
    where: "X[1 5 6 6] W[7 5] h[6] -> Y[1 7 6 6]"
    call: |
      return relu((W @ X.reshape(-1, 5, 36)).reshape(1, 7, 6, 6) + h.reshape(6, 1))
  - name: pw_twice
    where: "X[1 5 6 6] W[7 5] B[7] -> Y[1 7 6 6] Z[1 7 36]"
    call: |
      y = W @ X.reshape(-1, 5, 36)
      return relu(y.reshape(1, 7, 6, 6) + B.reshape(7, 1, 1)), y
builds:
  - {name: pw_clip, model: pw_clip}
  - {name: pw_clip_batch, model: pw_clip_batch}
  - {name: pw_residual, model: pw_residual}
  - {name: pw_rows_split, model: pw_rows_split}
  - {name: pw_bias_per_h, model: pw_bias_per_h}
  - {name: pw_twice, model: pw_twice}
)Y";
  const std::string clip = disasm(spec, "pw_clip");
  INFO(clip);
  CHECK(count(clip, "<WfInst") == 2);  // the next convolution's GEMM too
  CHECK(count(clip, "op=FUSED-MATMUL-ADD-SUB-SCALAR-RELU-AND-4-CPU") == 1);
  CHECK(count(clip, "{float, (2 7 6 6)}") == 0);  // all in the product's shape
  CHECK(count(disasm(spec, "pw_clip", true), "op=MATMUL-CPU") == 2);  // --no-fuse
  // A batch known at run time only: the leading axis both shapes share.
  const std::string batch = disasm(spec, "pw_clip_batch");
  INFO(batch);
  CHECK(count(batch, "<WfInst") == 2);
  CHECK(count(batch, "op=FUSED-MATMUL-ADD-SUB-SCALAR-RELU-AND-4-CPU") == 1);
  const std::string residual = disasm(spec, "pw_residual");
  INFO(residual);
  CHECK(count(residual, "<WfInst") == 2);
  CHECK(count(residual, "op=FUSED-MATMUL-ADD-ADD-CPU") == 1);
  for (const char* build : {"pw_rows_split", "pw_bias_per_h", "pw_twice"}) {
    const std::string d = disasm(spec, build);
    INFO(build << ":\n" << d);
    CHECK(count(d, "op=MATMUL-CPU") == 1);
    CHECK(count(d, "op=FUSED-MATMUL") == 0);
    CHECK(count(d, "<WfInst") == 2);  // the product, then its bias and relu in one pass
  }
}

// scaled_softmax's impl has fuse_attention: matmul -> scaled_softmax ->
// matmul becomes one attention kernel in an inference build (heads as
// column windows of q/k/v, causal or not, rank 3 and 4), but not in a
// training build (the softmax's backward reads the scores), nor when the
// scores or the product before the softmax have another reader.
TEST_CASE("matmul, scaled_softmax and matmul become one attention kernel where nothing else reads the scores") {
  const std::string spec = R"Y(
models:
  - name: heads
    where: "Q[2 6 8] K[2 6 8] V[2 6 8] -> Y[2 6 4]"
    call: |
      a = scaled_softmax(Q[:, :, 0:4] @ K[:, :, 0:4].T, scale=0.5, causal=true) @ V[:, :, 0:4]
      return a + scaled_softmax(Q[:, :, 4:8] @ K[:, :, 4:8].T, scale=0.5) @ V[:, :, 4:8]
  - name: rank4
    where: "Q[2 3 5 4] K[2 3 7 4] V[2 3 7 6] -> Y[2 3 5 6]"
    call: |
      return scaled_softmax(Q @ K.T, scale=0.5) @ V
  - name: scores_out
    where: "Q[6 4] K[6 4] V[6 4] -> Y[6 4] P[6 6]"
    call: |
      p = scaled_softmax(Q @ K.T, causal=true)
      return p @ V, p
  - name: product_twice
    where: "Q[6 4] K[6 4] V[6 4] -> Y[6 4]"
    call: |
      s = Q @ K.T
      return scaled_softmax(s, causal=true) @ V + sum(s, axis=-1, keepdims=true)
  - name: heads_train
    params: {Wq: {shape: [4, 4], init: {uniform: [-1, 1]}}}
    where: "X[6 4] -> Y[6 4]"
    call: |
      q = X @ Wq
      return scaled_softmax(q @ X.T, causal=true) @ X
builds:
  - {name: heads, model: heads}
  - {name: rank4, model: rank4}
  - {name: scores_out, model: scores_out}
  - {name: product_twice, model: product_twice}
  - {name: heads_train, model: heads_train, backward: true}
)Y";
  const std::string heads = disasm(spec, "heads");
  INFO(heads);
  CHECK(count(heads, "op=FUSED-ATTENTION-CPU") == 2);
  CHECK(count(heads, "op=SCALED-SOFTMAX-CPU") == 0);
  CHECK(count(heads, "op=MATMUL-CPU") == 0);
  CHECK(count(disasm(spec, "heads", true), "op=SCALED-SOFTMAX-CPU") == 2);  // --no-fuse
  const std::string rank4 = disasm(spec, "rank4");
  INFO(rank4);
  CHECK(count(rank4, "<WfInst") == 1);
  CHECK(count(rank4, "op=FUSED-ATTENTION-CPU") == 1);
  for (const char* build : {"scores_out", "product_twice", "heads_train"}) {
    const std::string text = disasm(spec, build);
    INFO(text);
    CHECK(count(text, "op=FUSED-ATTENTION") == 0);
    CHECK(count(text, "op=SCALED-SOFTMAX-CPU") == 1);
  }
}
