// ONNX import, the recurrent layers: RNN, GRU and LSTM as the stdlib's
// matmul, sigmoid, tanh, slices and concat, over a `for` loop of the body
// that the tracer unrolls over the sequence's static length. Nothing here is
// a kernel of its own: the imported model trains like any other body
// (backpropagation through time comes from autodiff of the unrolled steps).
//
// Per direction d the input's projection of every step is one matmul before
// the loop (X @ W[d].T, [T B G*H]); the loop adds the state's (h @ R[d].T)
// and applies the cell of ONNX's operator definition, gates in ONNX's order
// (LSTM i o f c, GRU z r h). A reverse direction walks t = T-1 .. 0 and
// writes its Y in the order of t. Constant sequence_lens shorter than T are
// a 0/1 mask [T B 1]: a masked step keeps the state and writes 0 to Y.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>

#include "wfgen/onnx/importer.hpp"

namespace wfgen::onnx_import::detail {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// `[:, a:b]`: gate k of a [.. G*H] tensor's last axis.
std::string gate(std::int64_t k, std::int64_t h) { return "[:, " + str(k * h) + ":" + str((k + 1) * h) + "]"; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// Refuses what the stdlib's cells do not compute: activations other than
// ONNX's defaults, their alpha/beta, clip, LSTM's input_forget.
void Importer::recurrent_attributes(const onnx::NodeProto& node, std::int64_t directions) const {
  const std::string& op = node.op_type();
  const std::vector<std::string> defaults = op == "LSTM"  ? std::vector<std::string>{"sigmoid", "tanh", "tanh"}
                                            : op == "GRU" ? std::vector<std::string>{"sigmoid", "tanh"}
                                                          : std::vector<std::string>{"tanh"};
  if (const auto* a = attr(node, "activations")) {
    bool same = a->strings_size() == static_cast<int>(defaults.size() * static_cast<std::size_t>(directions));
    std::string given;
    for (int k = 0; k < a->strings_size(); ++k) {
      given += (k ? ", " : "") + a->strings(k);
      if (same) same = lower(a->strings(k)) == defaults[static_cast<std::size_t>(k) % defaults.size()];
    }
    if (!same) {
      unsupported(node, "its attribute 'activations' = [" + given +
                            "]; wfgen imports the default activations only (Sigmoid, Tanh, Tanh for LSTM; Sigmoid, Tanh "
                            "for GRU; Tanh for RNN)");
    }
  }
  for (const char* name : {"activation_alpha", "activation_beta", "clip"}) {
    if (attr(node, name)) unsupported(node, std::string("its attribute '") + name + "' (wfgen imports unclipped default activations)");
  }
  if (attr_int(node, "input_forget", 0) != 0) unsupported(node, "its attribute 'input_forget' = 1 (coupled input and forget gates)");
}

// True when a node or the graph's outputs read `name`.
bool Importer::consumed(const std::string& name) const {
  if (name.empty()) return false;
  for (const auto& o : model_.graph().output())
    if (o.name() == name) return true;
  for (const auto& n : model_.graph().node())
    for (const auto& in : n.input())
      if (in == name) return true;
  return false;
}

// One direction's loop: writes the statements and returns the body names of
// its Y ([T B H] in the order of t, "" when no output reads Y), last h and c.
Importer::RecurrentRun Importer::recurrent_direction(const onnx::NodeProto& node, const RecurrentPlan& p, std::int64_t d) {
  const std::string& op = node.op_type();
  const std::int64_t h = p.hidden, gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1, gh = gates * h;
  const std::string ds = str(d), tag = p.name + (p.directions > 1 ? "_" + ds : "");
  const std::string w = p.w + "[" + ds + "]", r = p.r + "[" + ds + "]";
  const std::string what = label(node) + (p.directions > 1 ? ", direction " + ds : "");
  RecurrentRun run;
  // The input's projection of every step at once; LSTM's and RNN's two
  // biases add, GRU's recurrent one stays in the step (linear_before_reset
  // puts it inside r * (...)).
  std::string xw = p.x + " @ " + w + ".T";
  if (!p.b.empty()) {
    const std::string wb = p.b + "[" + ds + ", 0:" + str(gh) + "]", rb = p.b + "[" + ds + ", " + str(gh) + ":" + str(2 * gh) + "]";
    xw += " + " + (op == "GRU" ? wb : "(" + wb + " + " + rb + ")");
  }
  const std::string proj = identifier(tag + "_xw", "xw");
  line(proj + " = " + xw, "the input's part of every step's gates, " + what);
  auto initial = [&](const std::string& state, const char* which) {
    const std::string v = identifier(tag + "_" + which, which);
    if (state.empty()) line(v + " = " + proj + "[0]" + gate(0, h) + " * 0.0", std::string("no initial_") + which + ": zeros");
    else line(v + " = " + state + (p.layout ? "[:, " + ds + "]" : "[" + ds + "]"), std::string("initial_") + which);
    return v;
  };
  run.h = initial(p.h0, "h");
  if (op == "LSTM") run.c = initial(p.c0, "c");
  const bool masked = !p.mask.empty();
  const std::string s = identifier(tag + "_s", "s"), t = p.reverse(d) ? str(p.steps - 1) + " - " + s : s;
  const std::string g = identifier(tag + "_g", "g"), hn = masked ? identifier(tag + "_hn", "hn") : run.h;
  line("for " + s + " in range(" + str(p.steps) + "):", "the steps of " + what + (p.reverse(d) ? ", last to first" : ""));
  const std::string in = "  ";
  if (op == "LSTM") {
    const std::string cn = masked ? identifier(tag + "_cn", "cn") : run.c;
    const std::string pi = p.p.empty() ? "" : " + " + run.c + " * " + p.p + "[" + ds + ", 0:" + str(h) + "]";
    const std::string po = p.p.empty() ? "" : " + " + cn + " * " + p.p + "[" + ds + ", " + str(h) + ":" + str(2 * h) + "]";
    const std::string pf = p.p.empty() ? "" : " + " + run.c + " * " + p.p + "[" + ds + ", " + str(2 * h) + ":" + str(3 * h) + "]";
    line(in + g + " = " + proj + "[" + t + "] + " + run.h + " @ " + r + ".T", "gates i o f c");
    line(in + cn + " = sigmoid(" + g + gate(2, h) + pf + ") * " + run.c + " + sigmoid(" + g + gate(0, h) + pi + ") * tanh(" + g +
             gate(3, h) + ")",
         "c = f * c + i * tanh(...)");
    line(in + hn + " = sigmoid(" + g + gate(1, h) + po + ") * tanh(" + cn + ")", "h = o * tanh(c)");
    if (masked) line(in + run.c + " = " + run.c + " + " + p.mask + "[" + t + "] * (" + cn + " - " + run.c + ")", "past a sequence's length: kept");
  } else if (op == "GRU") {
    const std::string hr = identifier(tag + "_hr", "hr"), zr = identifier(tag + "_zr", "zr");
    const std::string rb = p.b.empty() ? "" : " + " + p.b + "[" + ds + ", " + str(gh) + ":" + str(gh + (p.linear_before_reset ? 3 : 2) * h) + "]";
    line(in + g + " = " + proj + "[" + t + "]", "gates z r h, the input's part");
    line(in + hr + " = " + run.h + " @ " + (p.linear_before_reset ? r : p.r + "[" + ds + ", 0:" + str(2 * h) + "]") + ".T" + rb,
         "the state's part");
    line(in + zr + " = sigmoid(" + g + "[:, 0:" + str(2 * h) + "] + " + hr + "[:, 0:" + str(2 * h) + "])", "z and r");
    std::string n;
    if (p.linear_before_reset) {
      n = "tanh(" + g + gate(2, h) + " + " + zr + gate(1, h) + " * " + hr + gate(2, h) + ")";
    } else {
      n = "tanh(" + g + gate(2, h) + " + (" + zr + gate(1, h) + " * " + run.h + ") @ " + p.r + "[" + ds + ", " + str(2 * h) + ":" +
          str(3 * h) + "].T" + (p.b.empty() ? "" : " + " + p.b + "[" + ds + ", " + str(gh + 2 * h) + ":" + str(2 * gh) + "]") + ")";
    }
    const std::string nn = identifier(tag + "_n", "n");
    line(in + nn + " = " + n, std::string("linear_before_reset = ") + (p.linear_before_reset ? "1" : "0"));
    line(in + hn + " = " + nn + " + " + zr + gate(0, h) + " * (" + run.h + " - " + nn + ")", "h = (1 - z) * n + z * h");
  } else {
    line(in + hn + " = tanh(" + proj + "[" + t + "] + " + run.h + " @ " + r + ".T)", "h = tanh(...)");
  }
  if (masked) line(in + run.h + " = " + run.h + " + " + p.mask + "[" + t + "] * (" + hn + " - " + run.h + ")", "past a sequence's length: kept");
  if (p.want_y) {
    run.y = identifier(tag + "_y", "y");
    const std::string step = (masked ? p.mask + "[" + t + "] * " + hn : run.h) + ".reshape(" + p.one_step + ")";
    line(in + "if " + s + " == 0: " + run.y + " = " + step, "Y, in the order of t");
    line(in + "else: " + run.y + " = concat(" + (p.reverse(d) ? step + ", " + run.y : run.y + ", " + step) + ", axis=0)", "");
  }
  return run;
}

// RNN, GRU and LSTM (recurrent.cpp's header says how).
void Importer::import_recurrent(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  const std::string& op = node.op_type();
  const std::int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  RecurrentPlan p;
  const std::string direction = attr(node, "direction") ? attr(node, "direction")->s() : "forward";
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    unsupported(node, "its attribute 'direction' = '" + direction + "' (forward, reverse or bidirectional)");
  }
  p.directions = direction == "bidirectional" ? 2 : 1;
  p.first_reverse = direction == "reverse";
  recurrent_attributes(node, p.directions);
  p.layout = attr_int(node, "layout", 0);
  if (p.layout != 0 && p.layout != 1) unsupported(node, "its attribute 'layout' = " + str(p.layout));
  p.linear_before_reset = attr_int(node, "linear_before_reset", 0) != 0;
  Value x = operand(node, 0), w = operand(node, 1), r = operand(node, 2);
  if (x.literal || rank_of(node, x) != 3) unsupported(node, "an input X that is not of rank 3");
  const Dims& xd = *x.dims;
  const auto steps = xd[p.layout ? 1 : 0], batch = xd[p.layout ? 0 : 1], features = xd[2];
  if (!steps) unsupported(node, "a sequence length known only at run time (the steps are unrolled when tracing; pass --dim to fix it)");
  p.steps = *steps;
  // An input's dims must be `want`'s where those are known (a run-time batch
  // may stay one in the initial states).
  auto known = [&](const Value& v, const char* name, Dims want) {
    if (v.literal || !v.dims || v.dims->size() != want.size()) {
      unsupported(node, std::string("its input ") + name + " is not of rank " + str(static_cast<std::int64_t>(want.size())));
    }
    for (std::size_t k = 0; k < want.size(); ++k)
      if (want[k] && (*v.dims)[k] != want[k]) {
        unsupported(node, std::string("its input ") + name + " of dims " + dims_text(*v.dims) + ", expected " + dims_text(want));
      }
  };
  if (!r.dims || r.dims->size() != 3 || !(*r.dims)[2]) unsupported(node, "its input R is not a known [directions gates*hidden hidden] tensor");
  p.hidden = *(*r.dims)[2];
  if (attr(node, "hidden_size") && attr_int(node, "hidden_size", 0) != p.hidden) {
    unsupported(node, "its attribute 'hidden_size' = " + str(attr_int(node, "hidden_size", 0)) + " differs from R's " + str(p.hidden));
  }
  const std::int64_t gh = gates * p.hidden;
  known(w, "W", {p.directions, gh, features});
  known(r, "R", {p.directions, gh, p.hidden});
  auto optional_input = [&](int k) { return node.input_size() > k && !node.input(k).empty(); };
  if (optional_input(3)) {
    Value b = operand(node, 3);
    known(b, "B", {p.directions, 2 * gh});
    p.b = b.body;
  }
  if (optional_input(4)) p.mask = recurrent_mask(node, p.steps, batch);
  auto state = [&](int k, const char* name) {
    if (!optional_input(k)) return std::string();
    Value v = operand(node, k);
    known(v, name, p.layout ? Dims{batch, p.directions, p.hidden} : Dims{p.directions, batch, p.hidden});
    return v.body;
  };
  p.h0 = state(5, "initial_h");
  if (op == "LSTM") {
    p.c0 = state(6, "initial_c");
    if (optional_input(7)) {
      Value peep = operand(node, 7);
      known(peep, "P", {p.directions, 3 * p.hidden});
      p.p = peep.body;
    }
  }
  p.name = identifier(!node.name().empty() ? node.name() : node.output(0), lower(op));
  used_.erase(p.name);  // a prefix of the names below, not a value
  p.x = p.layout ? identifier(p.name + "_x", "x") : x.body;
  if (p.layout) line(p.x + " = " + x.body + ".permute(1, 0, 2)", "layout 1: X is [batch steps features]");
  p.w = w.body;
  p.r = r.body;
  p.want_y = consumed(node.output(0));
  p.one_step = reshape_args(node, {1, batch, p.hidden});
  std::vector<RecurrentRun> runs;
  for (std::int64_t d = 0; d < p.directions; ++d) runs.push_back(recurrent_direction(node, p, d));
  recurrent_outputs(node, p, runs, batch);
}

// The mask of constant sequence_lens ([T B 1], 1 where t < the length), or
// "" when every sequence is T long.
std::string Importer::recurrent_mask(const onnx::NodeProto& node, std::int64_t steps, const std::optional<std::int64_t>& batch) {
  const std::vector<std::int64_t> lens = int_constant(node, 4, "its sequence_lens");
  if (!batch || static_cast<std::int64_t>(lens.size()) != *batch) {
    unsupported(node, "sequence_lens of " + str(static_cast<std::int64_t>(lens.size())) + " values for a batch of " +
                          (batch ? str(*batch) : std::string("a run-time size")));
  }
  if (std::all_of(lens.begin(), lens.end(), [&](std::int64_t n) { return n == steps; })) return "";
  std::vector<float> mask;
  for (std::int64_t t = 0; t < steps; ++t)
    for (std::int64_t n : lens) {
      if (n < 0 || n > steps) unsupported(node, "a sequence length of " + str(n) + " for " + str(steps) + " steps");
      mask.push_back(t < n ? 1.0f : 0.0f);
    }
  return float_parameter(node, node.input(4) + "_mask", {steps, *batch, 1}, mask).body;
}

// Y [T D B H] (layout 1: [B T D H]), Y_h and Y_c [D B H] (layout 1: [B D H]).
void Importer::recurrent_outputs(const onnx::NodeProto& node, const RecurrentPlan& p, const std::vector<RecurrentRun>& runs,
                                 const std::optional<std::int64_t>& batch) {
  auto join = [&](auto part, int axis) {
    std::string expr = part(runs[0]);
    for (std::size_t d = 1; d < runs.size(); ++d) expr = "concat(" + expr + ", " + part(runs[d]) + ", axis=" + str(axis) + ")";
    return expr;
  };
  const std::int64_t dirs = p.directions;
  if (p.want_y) {
    const std::string per = reshape_args(node, {p.steps, 1, batch, p.hidden});
    std::string y = join([&](const RecurrentRun& r) { return r.y + ".reshape(" + per + ")"; }, 1);
    if (p.layout) y = "(" + y + ").permute(2, 0, 1, 3)";
    define(node, 0, y, p.layout ? Dims{batch, p.steps, dirs, p.hidden} : Dims{p.steps, dirs, batch, p.hidden});
  }
  const std::string last = p.layout ? reshape_args(node, {batch, 1, p.hidden}) : p.one_step;
  auto state = [&](int k, std::string RecurrentRun::*member) {
    if (node.output_size() <= k || node.output(k).empty()) return;
    const std::string expr = join([&](const RecurrentRun& r) { return r.*member + ".reshape(" + last + ")"; }, p.layout ? 1 : 0);
    define(node, k, expr, p.layout ? Dims{batch, dirs, p.hidden} : Dims{dirs, batch, p.hidden});
  };
  state(1, &RecurrentRun::h);
  if (node.op_type() == "LSTM") state(2, &RecurrentRun::c);
  else if (node.output_size() > 2 && !node.output(2).empty()) unsupported(node, "a third output (only LSTM has Y_c)");
}

}  // namespace wfgen::onnx_import::detail
