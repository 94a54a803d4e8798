# Attributes the perf samples of one symbol to its innermost loops (address
# ranges closed by a backward jump) and prints each loop's share and main
# instructions. Used by bench/profile.sh.
import re, subprocess, sys, collections
data, sym = sys.argv[1], sys.argv[2]
out = subprocess.run(["perf", "annotate", "-i", data, "--stdio", "-s", sym], capture_output=True, text=True).stdout
ins = []  # (addr, pct, text)
for line in out.splitlines():
    m = re.match(r"\s*([\d.]+)\s*:\s*([0-9a-f]+):\s*(.*)", line)
    if m: ins.append((int(m.group(2), 16), float(m.group(1)), m.group(3)))
loops = []
for a, p, t in ins:
    m = re.match(r"j\w+\s+([0-9a-f]+)", t)
    if m and int(m.group(1), 16) < a: loops.append((int(m.group(1), 16), a))
def innermost(a):
    best = None
    for lo, hi in loops:
        if lo <= a <= hi and (best is None or hi - lo < best[1] - best[0]): best = (lo, hi)
    return best
acc = collections.defaultdict(float); ops = collections.defaultdict(collections.Counter)
for a, p, t in ins:
    l = innermost(a); acc[l] += p
    ops[l][t.split()[0]] += 1
for l, p in sorted(acc.items(), key=lambda x: -x[1]):
    if p < 1: continue
    name = "outside loops" if l is None else "loop %x-%x (%d instructions)" % (l[0], l[1], sum(ops[l].values()))
    print("%5.1f%%  %s: %s" % (p, name, " ".join("%s" % k for k, _ in ops[l].most_common(8))))
