#!/usr/bin/python3
"""The PyTorch peer section of bench/run.sh (issue 38).

What a user would otherwise run is PyTorch's eager mode on the same CPU, so
this script times torch on the workloads wfgen's benchmark times, in the same
run, at the same thread counts, from the same weights and inputs, and writes
rows with baseline `torch@<N>t` into bench/results/latest.csv and .md.

    /usr/bin/python3 bench/torch_peer.py export DIR
        torchvision's resnet18 and mobilenet_v2 (weights=None, seeded), in
        eval mode, to DIR/resnet18.onnx and DIR/mobilenetv2.onnx; run.sh then
        imports them with `wfgen import` and builds wfgen_peer.
    /usr/bin/python3 bench/torch_peer.py run DIR PEER CSV MD [--threads 1,2] [--passes 11]
        for each workload: the weights (wfgen's initial parameters, saved by
        wfgen_peer and loaded here; torch's own for the imported models), one
        input, a CHECK of both outputs (see TOLERANCES), then the timing,
        wfgen_peer's passes and torch's interleaved; appends the rows.
    /usr/bin/python3 bench/torch_peer.py profile DIR PEER WORKLOAD[,...] [--threads 1] [--samples 20]
        after the same check, the VM's per-instruction profile of wfgen's side
        (DIR/WORKLOAD.profile.txt, printed) and torch's own profile of a call
        (torch.autograd.profiler, the top operators by self CPU time).

Exit status 3 from `export` when torch or torchvision cannot be imported
(run.sh then skips the section with a note).
"""
import math
import os
import random
import struct
import subprocess
import sys
import time

# Tolerances of the check made before anything is timed (f32 on both sides,
# different summation orders): |wfgen - torch| <= RTOL |torch| + ATOL scale,
# scale = max|torch| over the compared tensor (each gradient, the output) or,
# for a gradient, FLOOR times the largest |torch| of all gradients when that
# is larger (attention's key bias has a gradient of exactly 0 in exact
# arithmetic, softmax not seeing what is added to every score of a row: both
# sides give rounding noise of ~1e-10 there), and the loss within LOSS_RTOL. A disagreement ends the section with the workload, the tensor,
# the element and both values.
RTOL = 1e-3
ATOL = 1e-4
LOSS_RTOL = 1e-4
FLOOR = 1e-3

WORKLOADS = [
    "tinylm_train_b16",
    "gpt_decoder_infer",
    "cnn_train_b64",
    "mlp_train_b64",
    "resnet18_infer_1x3x224x224",
    "mobilenetv2_infer_1x3x224x224",
]
IMPORTED = {"resnet18_infer_1x3x224x224": "resnet18", "mobilenetv2_infer_1x3x224x224": "mobilenetv2"}
LM = dict(vocab=256, context=64, d_model=64, heads=4, layers=2, batch=16)  # examples/tiny-lm/tiny_lm.yaml's lm_train


def fail(message):
    sys.stderr.write("torch_peer: FAILED: " + message + "\n")
    sys.exit(1)


# --- wfgen's parameter files (docs/runtime-api.md: "WFGENPRM") ---------------
DTYPES = {0: ("f", 4), 1: ("d", 8), 2: ("i", 4), 3: ("q", 8), 4: ("B", 1)}


def read_wfparams(path):
    """{name: torch tensor} of a parameter file written by save_parameters."""
    import torch
    data = open(path, "rb").read()
    if data[:8] != b"WFGENPRM":
        fail(path + " is not a wfgen parameter file")
    version, count = struct.unpack_from("<II", data, 8)
    pos, out = 16, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        dtype, rank = struct.unpack_from("<BI", data, pos)
        pos += 5
        dims = struct.unpack_from("<%dq" % rank, data, pos)
        pos += 8 * rank
        (nbytes,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        code, size = DTYPES[dtype]
        values = struct.unpack_from("<%d%s" % (nbytes // size, code), data, pos)
        pos += nbytes
        out[name] = torch.tensor(values, dtype=torch.float32 if dtype == 0 else torch.float64).reshape(dims)
    return out


# --- the torch side of each workload ---------------------------------------------
def lm_logits(P, ids):
    """tiny_lm of examples/tiny-lm/tiny_lm.yaml, as a torch user writes it: heads
    batched with view/transpose, a masked_fill causal mask, F.layer_norm, F.gelu
    (exact, as wfgen's), the output head tied to the token embedding."""
    import torch
    import torch.nn.functional as F
    d, h = LM["d_model"], LM["heads"]
    dh = d // h
    B, T = ids.shape
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    x = P["token_embedding"][ids] + P["position_embedding"]
    for i in range(LM["layers"]):
        blk = "transformer_block_%d/" % i
        att = blk + "multi_head_attention_%d." % i
        ln1, ln2, fc1, fc2 = 2 * i, 2 * i + 1, 2 * i, 2 * i + 1
        a = F.layer_norm(x, (d,), P[blk + "layernorm_%d.gamma" % ln1], P[blk + "layernorm_%d.beta" % ln1], 1e-5)
        q, k, v = ((a @ P[att + "W" + n] + P[att + "b" + n]).view(B, T, h, dh).transpose(1, 2) for n in "qkv")
        scores = (q @ k.transpose(-2, -1) * dh ** -0.5).masked_fill(mask, float("-inf"))
        o = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, d)
        x = x + o @ P[att + "Wo"] + P[att + "bo"]
        a = F.layer_norm(x, (d,), P[blk + "layernorm_%d.gamma" % ln2], P[blk + "layernorm_%d.beta" % ln2], 1e-5)
        a = F.gelu(a @ P[blk + "linear_%d.W" % fc1] + P[blk + "linear_%d.b" % fc1])
        x = x + a @ P[blk + "linear_%d.W" % fc2] + P[blk + "linear_%d.b" % fc2]
    n = 2 * LM["layers"]
    x = F.layer_norm(x, (d,), P["layernorm_%d.gamma" % n], P["layernorm_%d.beta" % n], 1e-5)
    return x @ P["token_embedding"].T


def lm_loss(P, ids, targets):
    import torch.nn.functional as F
    return F.cross_entropy(lm_logits(P, ids).reshape(-1, LM["vocab"]), targets.reshape(-1))


def cnn_loss(P, X, T):
    """classifier of examples/cnn-training/cnn.yaml; wfgen keeps a convolution's
    W as [out, in*3*3] (the im2col GEMM's), viewed here as torch's [out, in, 3, 3]."""
    import torch.nn.functional as F
    h = F.max_pool2d(F.relu(F.conv2d(X, P["conv2d_0.W"].view(16, 1, 3, 3), P["conv2d_0.b"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, P["conv2d_1.W"].view(32, 16, 3, 3), P["conv2d_1.b"])), 2)
    logits = h.reshape(h.shape[0], -1) @ P["linear_0.W"] + P["linear_0.b"]
    return F.cross_entropy(logits, T)  # one-hot T: the probability-target form


def mlp_loss(P, X, T):
    """mlp_classifier of bench/specs/mlp.yaml."""
    import torch.nn.functional as F
    return F.cross_entropy(F.relu(X @ P["W1"] + P["b1"]) @ P["W2"] + P["b2"], T)


def strip_scope(params):
    """A training build names the called model's parameters "<model>_0/..." or
    "<model>_0.x"; the torch functions use the model's own names."""
    out = {}
    for name, t in params.items():
        for sep in ("/", "."):
            head, found, rest = name.partition(sep)
            if found and head.endswith("_0") and head.split("_")[0] in ("tiny", "classifier", "mlp"):
                name = rest
                break
        out[name] = t
    return out


def make_inputs(workload, seed=38):
    """Deterministic inputs, as numpy arrays (written raw for wfgen_peer)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    if workload in ("tinylm_train_b16", "gpt_decoder_infer"):
        ids = rng.integers(0, LM["vocab"], size=(LM["batch"], LM["context"]), dtype=np.int64)
        return [ids, np.roll(ids, -1, axis=1)] if workload == "tinylm_train_b16" else [ids]
    if workload in ("cnn_train_b64", "mlp_train_b64"):
        shape = (64, 1, 28, 28) if workload == "cnn_train_b64" else (64, 784)
        x = rng.random(shape, dtype=np.float32)  # pixels in [0, 1)
        t = np.zeros((64, 10), dtype=np.float32)
        t[np.arange(64), rng.integers(0, 10, size=64)] = 1.0
        return [x, t]
    return [rng.standard_normal((1, 3, 224, 224), dtype=np.float32)]


class Torch:
    """One workload on the torch side: `check()` returns what wfgen_peer's
    check writes (losses and gradients, or the output); `call()` is what is
    timed: a whole training step (zero_grad, forward, backward, step) or a
    forward under no_grad."""

    def __init__(self, workload, peer_dir, inputs):
        import torch
        self.torch = torch
        self.inputs = [torch.from_numpy(a) for a in inputs]
        self.module = None
        if workload in IMPORTED:
            self.module = vision_model(IMPORTED[workload])
            self.forward = lambda: self.module(*self.inputs)
            return
        params = read_wfparams(os.path.join(peer_dir, workload + ".init.wfparams"))
        self.names = list(params)
        self.params = [p.requires_grad_() for p in params.values()]
        P = strip_scope(dict(zip(self.names, self.params)))
        if workload == "gpt_decoder_infer":
            self.forward = lambda: lm_logits(P, *self.inputs)
            return
        loss = {"tinylm_train_b16": lm_loss, "cnn_train_b64": cnn_loss, "mlp_train_b64": mlp_loss}[workload]
        self.loss = lambda: loss(P, *self.inputs)
        # The optimizers of the specs: tiny_lm.yaml AdamW (lr 0.003, weight decay
        # 0.01), cnn.yaml Adam (lr 0.001), mlp.yaml SGD (lr 0.01); betas 0.9,
        # 0.999 and eps 1e-8 as wfgen's defaults (stdlib/nodes.yaml).
        if workload == "tinylm_train_b16":
            self.opt = torch.optim.AdamW(self.params, lr=0.003, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        elif workload == "cnn_train_b64":
            self.opt = torch.optim.Adam(self.params, lr=0.001, betas=(0.9, 0.999), eps=1e-8)
        else:
            self.opt = torch.optim.SGD(self.params, lr=0.01)
        self.forward = None

    def train_step(self):
        self.opt.zero_grad()
        loss = self.loss()
        loss.backward()
        self.opt.step()
        return loss

    def check(self):
        if self.forward is not None:
            with self.torch.no_grad():
                return {"out": self.forward().reshape(-1)}
        first = self.train_step()
        grads = {n: p.grad.clone() for n, p in zip(self.names, self.params)}
        with self.torch.no_grad():
            second = self.loss()
        return {"losses": [float(first), float(second)], "grads": grads}

    def call(self):
        if self.forward is not None:
            with self.torch.no_grad():
                self.forward()
        else:
            self.train_step()


def vision_model(name):
    import torch
    import torchvision
    torch.manual_seed(38)
    ctor = {"resnet18": torchvision.models.resnet18, "mobilenetv2": torchvision.models.mobilenet_v2}[name]
    model = ctor(weights=None).eval()
    # weights=None leaves BatchNorm at mean 0, variance 1: give its statistics
    # seeded values, so the imported BatchNormalization does real work.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model


def export(peer_dir):
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as e:
        print("torch_peer: %s: the PyTorch peer section needs python3-torch and python3-torchvision" % e)
        sys.exit(3)
    os.makedirs(peer_dir, exist_ok=True)
    for workload, name in IMPORTED.items():
        model = vision_model(name)
        x = torch.from_numpy(make_inputs(workload)[0])
        torch.onnx.export(model, (x,), os.path.join(peer_dir, name + ".onnx"), opset_version=13,
                          input_names=["image"], output_names=["logits"])
        print("torch_peer: exported %s (torchvision %s, weights=None, seed 38) to %s.onnx" % (name, torchvision.__version__, name))


# --- the check ---------------------------------------------------------------
def compare(workload, what, wf, ref, floor=0.0):
    """wf, ref: torch tensors. Returns the largest |wf - ref| / (RTOL |ref| + ATOL max(max|ref|, floor))."""
    if wf.numel() != ref.numel():
        fail("%s: %s has %d elements from wfgen, %d from torch" % (workload, what, wf.numel(), ref.numel()))
    ref, wf = ref.double().reshape(-1), wf.double().reshape(-1)
    bound = RTOL * ref.abs() + ATOL * max(float(ref.abs().max()), floor, 1e-30)
    excess = (wf - ref).abs() / bound
    i = int(excess.argmax())
    if not float(excess[i]) <= 1.0:
        fail("%s: %s differs at element %d: wfgen %.7g, torch %.7g (tolerance %.3g = %g |torch| + %g max|torch|)"
             % (workload, what, i, float(wf[i]), float(ref[i]), float(bound[i]), RTOL, ATOL))
    return float(excess[i])


def check(workload, peer, peer_dir, side):
    import numpy as np
    import torch
    expect = side.check()
    peer.ask("check " + workload)
    base = os.path.join(peer_dir, workload)
    if "out" in expect:
        wf = torch.from_numpy(np.fromfile(base + ".wfgen.out", dtype=np.float32))
        worst = compare(workload, "the output", wf, expect["out"])
        return "output (%d values) within %.2f of the tolerance" % (wf.numel(), worst)
    losses = np.fromfile(base + ".wfgen.losses", dtype=np.float32)
    for k, (a, b) in enumerate(zip(losses, expect["losses"])):
        if not abs(a - b) <= LOSS_RTOL * abs(b):
            fail("%s: the loss %s differs: wfgen %.7g, torch %.7g (tolerance %g relative)"
                 % (workload, "of the first step" if k == 0 else "after one step", a, b, LOSS_RTOL))
    grads = read_wfparams(base + ".wfgen.grads.wfparams")
    if sorted(grads) != sorted(expect["grads"]):
        fail("%s: wfgen's gradients are of %s, torch's of %s" % (workload, sorted(grads), sorted(expect["grads"])))
    floor = FLOOR * max(float(g.abs().max()) for g in expect["grads"].values())
    worst = max(compare(workload, "the gradient of " + n, grads[n], g, floor) for n, g in expect["grads"].items())
    return "loss %.5f (then %.5f after one step) as torch's; %d gradients within %.2f of the tolerance" % (
        losses[0], losses[1], len(grads), worst)


# --- timing ------------------------------------------------------------------
class Peer:
    """wfgen_peer, driven over its stdin (see bench/peer.cpp)."""

    def __init__(self, exe, peer_dir):
        self.proc = subprocess.Popen([exe, peer_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if not answer.startswith("ok"):
            fail("wfgen_peer: %s: %s" % (line, answer or "no answer (it exited)"))
        return answer[2:].strip()

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        self.proc.wait()


def set_torch_threads(n):
    """torch.set_num_threads sets OpenMP's threads; Debian's torch calls BLAS
    (libblas.so.3, OpenBLAS through the alternatives) for its GEMMs, whose
    own threads it leaves alone: give OpenBLAS the same count, or torch at
    "1 thread" runs its GEMMs on every core."""
    import ctypes
    import torch
    torch.set_num_threads(n)
    try:
        ctypes.CDLL("libblas.so.3").openblas_set_num_threads(n)
    except (OSError, AttributeError):
        pass  # not OpenBLAS: torch.set_num_threads is all there is


def time_pair(workload, peer, side, passes, min_pass=0.02):
    """Per-call seconds of wfgen and torch over `passes` passes, interleaved
    pass by pass in a shuffled order (fixed seed), as wfgen_bench does. Each
    side gets two warm-up calls; the second sizes its pass (at least min_pass
    seconds). Before each torch pass wfgen_peer's threads settle (OpenBLAS's
    spin); before each wfgen pass wfgen_peer waits for its own, and torch's
    OpenMP threads get 10 ms to stop spinning."""
    def wfgen_time(n):
        return float(peer.ask("time %s %d" % (workload, n)))

    def torch_time(n):
        peer.ask("settle")
        start = time.perf_counter()
        for _ in range(n):
            side.call()
        return time.perf_counter() - start

    reps, per_call = [], [[], []]
    for timer in (wfgen_time, torch_time):
        timer(1)
        reps.append(max(1, math.ceil(min_pass / max(timer(1), 1e-9))))
    rng = random.Random(38)
    for _ in range(passes):
        order = [0, 1]
        rng.shuffle(order)
        for k in order:
            time.sleep(0.01)
            per_call[k].append((wfgen_time, torch_time)[k](reps[k]) / reps[k])
    return [stats(p) for p in per_call]


def stats(values):
    v = sorted(values)

    def pct(q):  # linear interpolation, as wfgen_bench's stats_of
        x = q * (len(v) - 1)
        lo = int(math.floor(x))
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (x - lo)
    return {"median": pct(0.5), "p10": pct(0.1), "p90": pct(0.9)}


# --- the report ----------------------------------------------------------------
def fmt_time(s):
    return "%.2f ms" % (s * 1e3) if s >= 1e-3 else "%.1f us" % (s * 1e6)


def write_rows(results, checks, csv_path, md_path, threads, passes):
    import torch
    with open(csv_path, "a") as csv:
        for (w, t), (wf, th) in results.items():
            line = lambda impl, s, base, ratio: csv.write("%s,%s,%d,%.6g,%.6g,%.6g,%s,%s,\n" % (
                w, impl, t, s["median"], s["p10"], s["p90"], base, ratio))
            line("torch", th, "", "")
            line("wfgen", wf, "torch@%dt" % t, "%.3f" % (wf["median"] / th["median"]))
            if t != threads[0] and (w, threads[0]) in results:
                wf1, th1 = results[(w, threads[0])]
                line("wfgen", wf, "wfgen@%dt" % threads[0], "%.3f" % (wf["median"] / wf1["median"]))
                line("torch", th, "torch@%dt" % threads[0], "%.3f" % (th["median"] / th1["median"]))
    md = ["", "## PyTorch peer (issue 38)", "",
          "torch %s (CPU; `torch.set_num_threads` and OpenBLAS's threads as wfgen's), torchvision %s, run by `bench/torch_peer.py`"
          " beside `wfgen_peer` (bench/peer.cpp); %d passes each, wfgen's and torch's interleaved pass by pass."
          " The wfgen rows of cnn_train_b64 and mlp_train_b64 here are their own passes, beside torch's"
          " (the rows above are beside the hand-written baselines)." % (torch.__version__, _tv_version(), passes),
          "", "Checked before timing (f32 both sides; |wfgen - torch| <= %g |torch| + %g max|torch| per tensor,"
          " for a gradient with max|torch| taken as at least %g of the step's largest |gradient|; losses within %g relative):"
          % (RTOL, ATOL, FLOOR, LOSS_RTOL), ""]
    md += ["- `%s`: %s" % (w, c) for w, c in checks.items()]
    md += ["", "| workload | threads | wfgen | torch | wfgen / torch | speed-up from %dt (wfgen, torch) |" % threads[0],
           "| --- | ---: | ---: | ---: | ---: | --- |"]
    for (w, t), (wf, th) in results.items():
        speed = ""
        if t != threads[0] and (w, threads[0]) in results:
            wf1, th1 = results[(w, threads[0])]
            speed = "%.2fx, %.2fx" % (wf1["median"] / wf["median"], th1["median"] / th["median"])
        md.append("| %s | %d | %s (%s-%s) | %s (%s-%s) | **%.2f** | %s |" % (
            w, t, fmt_time(wf["median"]), fmt_time(wf["p10"]), fmt_time(wf["p90"]),
            fmt_time(th["median"]), fmt_time(th["p10"]), fmt_time(th["p90"]), wf["median"] / th["median"], speed))
    with open(md_path, "a") as f:
        f.write("\n".join(md) + "\n")


def _tv_version():
    import torchvision
    return torchvision.__version__


def run(peer_dir, peer_exe, csv_path, md_path, threads, passes, only):
    import torch
    torch.manual_seed(38)
    peer = Peer(peer_exe, peer_dir)
    sides, checks, results = {}, {}, {}
    for w in [w for w in WORKLOADS if not only or w in only]:
        inputs = make_inputs(w)
        for k, a in enumerate(inputs):
            a.tofile(os.path.join(peer_dir, "%s.in%d.bin" % (w, k)))
        peer.ask("init " + w)
        sides[w] = Torch(w, peer_dir, inputs)
        # The check, at the first thread count (each side's result must not
        # depend on it: a split reduction may round differently, within RTOL).
        peer.ask("threads %d" % threads[0])
        set_torch_threads(threads[0])
        checks[w] = check(w, peer, peer_dir, sides[w])
        print("torch_peer: %s: %s" % (w, checks[w]), flush=True)
    for t in threads:
        peer.ask("threads %d" % t)
        set_torch_threads(t)
        for w, side in sides.items():
            results[(w, t)] = time_pair(w, peer, side, passes)
            wf, th = results[(w, t)]
            print("torch_peer: %s at %d thread(s): wfgen %s, torch %s, ratio %.2f" % (
                w, t, fmt_time(wf["median"]), fmt_time(th["median"]), wf["median"] / th["median"]), flush=True)
    peer.close()
    order = {w: i for i, w in enumerate(WORKLOADS)}
    results = dict(sorted(results.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])))
    write_rows(results, checks, csv_path, md_path, threads, passes)


def profile(peer_dir, peer_exe, workloads, threads, samples):
    import torch
    peer = Peer(peer_exe, peer_dir)
    peer.ask("threads %d" % threads)
    set_torch_threads(threads)
    for w in workloads:
        inputs = make_inputs(w)
        for k, a in enumerate(inputs):
            a.tofile(os.path.join(peer_dir, "%s.in%d.bin" % (w, k)))
        peer.ask("init " + w)
        side = Torch(w, peer_dir, inputs)
        print("## %s: %s" % (w, check(w, peer, peer_dir, side)))
        peer.ask("profile %s %d" % (w, samples))
        print("\n### wfgen (the VM's profile, %d runs, %d thread(s))\n" % (samples, threads))
        print(open(os.path.join(peer_dir, w + ".profile.txt")).read())
        for _ in range(3):
            side.call()
        with torch.autograd.profiler.profile() as prof:
            for _ in range(samples):
                side.call()
        print("### torch (torch.autograd.profiler, %d calls)\n" % samples)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    peer.close()


def main(argv):
    if len(argv) >= 2 and argv[0] == "export":
        export(argv[1])
        return
    if len(argv) >= 5 and argv[0] == "run":
        opts = dict(zip(argv[5::2], argv[6::2]))
        threads = [int(t) for t in opts.get("--threads", "1,2").split(",")]
        only = [w for w in opts.get("--only", "").split(",") if w]
        run(argv[1], argv[2], argv[3], argv[4], threads, int(opts.get("--passes", "11")), only)
        return
    if len(argv) >= 4 and argv[0] == "profile":
        opts = dict(zip(argv[4::2], argv[5::2]))
        profile(argv[1], argv[2], argv[3].split(","), int(opts.get("--threads", "1")), int(opts.get("--samples", "20")))
        return
    sys.stderr.write(__doc__)
    sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
