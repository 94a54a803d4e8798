#!/usr/bin/env python3
"""Runs the snippets of README.md and docs/*.md that are marked to run.

The convention is in docs/contributing.md ("Documentation that is tested").
In short, the info string of a fenced block is LANG [ATTR...]:

  run            a shell session: `$ command` lines are run in order with
                 bash, each followed by the output it must print (stdout and
                 stderr together); `...` alone on a line stands for any lines,
                 `[..]` for any text within a line; a last line `[exit N]`
                 expects exit status N (else 0). A block without `$` lines is
                 one script that must exit 0 (its output is not compared).
  spec           a spec: written to the page's folder (file=NAME, else a
                 name of its own; blocks with the same NAME are joined in
                 order) and checked with `wfgen check` when the page ends.
  excerpt=PATH   the block must appear verbatim in PATH: relative to the
                 page's folder after the blocks before it ran, or to the
                 repository with `repo:` (examples/mlp-training/mlp.yaml).
  no-run         illustrative: not run. A block with `$` lines or a spec
                 that has no attribute is a failure: its author decides.

and `<!-- example: NAME -->` before a block says a test compiles it: that
NAME must be an example of tests/models/runtime_api_examples.cpp (which
checks the block itself).

Each page runs in a folder of its own, with the wfgen of the build first on
PATH and HOME set so that `$HOME/.local/wfgen` is the installed package.

  doc_snippets.py --repo DIR --wfgen BIN --prefix DIR --work DIR [PAGE...]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

FENCE = re.compile(r"^(\s*)(```+)(.*)$")
EXAMPLE = re.compile(r"<!--\s*example:\s*([\w-]+)\s*-->")
KNOWN_ATTRS = {"run", "spec", "no-run"}


class Block:
    def __init__(self, page, line, info, text, example):
        self.page, self.line, self.text, self.example = page, line, text, example
        words = info.split()
        self.lang = words[0] if words else ""
        self.attrs = {}
        for w in words[1:]:
            key, _, value = w.partition("=")
            self.attrs[key] = value

    def where(self):
        return f"{self.page}:{self.line}"


def blocks_of(page, text):
    """The fenced blocks of a page, with the line of their opening fence."""
    out, lines, k = [], text.split("\n"), 0
    example = None
    while k < len(lines):
        m = FENCE.match(lines[k])
        ex = EXAMPLE.search(lines[k])
        if ex:
            example = ex.group(1)
        if not m:
            if lines[k].strip() and not ex:
                example = None
            k += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        body, j = [], k + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip("`") == ""):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        out.append(Block(page, k + 1, info, "\n".join(body) + "\n", example))
        example = None
        k = j + 1
    return out


def line_matches(pattern, line):
    if "[..]" not in pattern:
        return pattern == line
    parts = [re.escape(p) for p in pattern.split("[..]")]
    return re.fullmatch(".*".join(parts), line) is not None


def output_matches(expected, got):
    """Line by line; `...` matches any lines (zero or more)."""
    exp = [l.rstrip() for l in expected]
    act = [l.rstrip() for l in got]
    while exp and not exp[-1]:
        exp.pop()
    while act and not act[-1]:
        act.pop()

    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(exp):
            r = j == len(act)
        elif exp[i] == "...":
            r = any(match(i + 1, jj) for jj in range(j, len(act) + 1))
        else:
            r = j < len(act) and line_matches(exp[i], act[j]) and match(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return match(0, 0)


def session(block):
    """The commands of a `run` block with their expected output and status."""
    steps, cmd, expect = [], None, []
    lines = block.text.rstrip("\n").split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("$ "):
            if cmd is not None:
                steps.append((cmd, expect))
            cmd, expect = line[2:], []
            while cmd.endswith("\\") and k + 1 < len(lines):
                k += 1
                cmd = cmd + "\n" + lines[k]  # bash joins the lines
        elif cmd is not None:
            expect.append(line)
        k += 1
    if cmd is not None:
        steps.append((cmd, expect))
    out = []
    for cmd, expect in steps:
        status = 0
        if expect and re.fullmatch(r"\[exit \d+\]", expect[-1].strip()):
            status = int(expect[-1].strip()[6:-1])
            expect = expect[:-1]
        out.append((cmd, expect, status))
    return out


class Page:
    def __init__(self, args, page):
        self.args, self.page = args, page
        self.work = os.path.join(args.work, page.replace("/", "_").replace(".md", ""))
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.cwd = self.work
        home = os.path.join(self.work, ".home")
        os.makedirs(os.path.join(home, ".local"))
        os.symlink(os.path.abspath(args.prefix), os.path.join(home, ".local", "wfgen"))
        self.env = dict(os.environ, HOME=home, NO_COLOR="1", TERM="dumb",
                        PATH=os.path.dirname(os.path.abspath(args.wfgen)) + os.pathsep + os.environ["PATH"])
        self.specs = {}  # name -> (first block, text)
        self.failures = []
        self.counts = {"run": 0, "spec": 0, "excerpt": 0, "example": 0}

    def fail(self, block, why):
        self.failures.append(f"{block.where()}: {why}")

    def run_command(self, cmd):
        # The folder a command leaves (`cd DIR && ...`) is where the next one starts.
        marker = os.path.join(self.work, ".cwd")
        script = f"cd {sh_quote(self.cwd)}\n{cmd}\n__s=$?\npwd > {sh_quote(marker)}\nexit $__s\n"
        p = subprocess.run(["bash", "-c", script], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=600)
        if os.path.exists(marker):
            with open(marker) as f:
                self.cwd = f.read().strip() or self.cwd
        return p.returncode, p.stdout

    def run(self, block):
        steps = session(block)
        self.counts["run"] += 1
        if not steps:
            code, out = self.run_command(block.text)
            if code != 0:
                self.fail(block, f"the script exited with {code}:\n{out}")
            return
        for cmd, expect, status in steps:
            code, out = self.run_command(cmd)
            if code != status:
                self.fail(block, f"`{cmd}` exited with {code}, expected {status}:\n{out}")
                return
            if not output_matches(expect, out.split("\n")):
                self.fail(block, f"`{cmd}` printed:\n{out}\n--- expected:\n" + "\n".join(expect))
                return

    def spec(self, block):
        self.counts["spec"] += 1
        name = block.attrs.get("spec") or block.attrs.get("file") or f"spec_{block.line}.yaml"
        first, text = self.specs.get(name, (block, ""))
        self.specs[name] = (first, text + block.text)
        with open(os.path.join(self.cwd, name), "w") as f:
            f.write(self.specs[name][1])

    def excerpt(self, block):
        self.counts["excerpt"] += 1
        path = block.attrs["excerpt"]
        full = os.path.join(self.args.repo, path[5:]) if path.startswith("repo:") else os.path.join(self.cwd, path)
        try:
            with open(full) as f:
                text = f.read()
        except OSError as e:
            self.fail(block, f"excerpt of {path}: {e}")
            return
        if not contains_indented(text, block.text):
            self.fail(block, f"the block is not in {path} as shown:\n{block.text}")

    def finish(self):
        for name, (block, _) in self.specs.items():
            code, out = self.run_command(f"wfgen check {sh_quote(name)}")
            if code != 0:
                self.fail(block, f"`wfgen check {name}` exited with {code}:\n{out}")


def contains_indented(text, block):
    """Whether the block's lines are consecutive lines of `text`, each with
    the same indentation put before it (code in a function body)."""
    want = block.rstrip("\n").split("\n")
    have = text.split("\n")
    for k in range(len(have) - len(want) + 1):
        first = have[k]
        if not first.endswith(want[0]):
            continue
        indent = first[:len(first) - len(want[0])]
        if indent.strip():
            continue
        # An empty line of the block is an empty (or blank) line of the file.
        if all((have[k + j] == indent + w) if w else not have[k + j].strip() for j, w in enumerate(want)):
            return True
    return False


SPEC_KEYS = re.compile(r"^(nodes|impls|ops|models|paths|builds):", re.M)


def looks_runnable(block):
    """A block whose author must decide: a shell session ($ lines) or a spec."""
    if any(line.startswith("$ ") for line in block.text.split("\n")):
        return True
    return block.lang in ("yaml", "yml") and SPEC_KEYS.search(block.text) is not None


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--wfgen", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--lenient", action="append", default=[],
                    help="a page whose unmarked runnable-looking blocks are warnings, not failures")
    ap.add_argument("pages", nargs="*")
    args = ap.parse_args()
    pages = args.pages or ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(args.repo, "docs"))
                                                 if f.endswith(".md"))
    with open(os.path.join(args.repo, "tests/models/runtime_api_examples.cpp")) as f:
        compiled_examples = set(re.findall(r"// \[example: ([\w-]+)\]", f.read()))
    failures, warnings, total = [], [], {"run": 0, "spec": 0, "excerpt": 0, "example": 0}
    for page in pages:
        with open(os.path.join(args.repo, page)) as f:
            blocks = blocks_of(page, f.read())
        p = Page(args, page)
        for b in blocks:
            unknown = set(b.attrs) - KNOWN_ATTRS - {"excerpt", "file"}
            if unknown:
                p.fail(b, f"unknown attribute {', '.join(sorted(unknown))} (docs/contributing.md lists them)")
                continue
            if b.example:
                p.counts["example"] += 1
                if b.example not in compiled_examples:
                    p.fail(b, f"example '{b.example}' is not in tests/models/runtime_api_examples.cpp")
            if not b.attrs and not b.example and looks_runnable(b):
                why = "a block that looks runnable is not marked: add run, spec or excerpt=, or no-run (docs/contributing.md)"
                if page in args.lenient:
                    warnings.append(f"{b.where()}: {why}")
                else:
                    p.fail(b, why)
                continue
            if "no-run" in b.attrs:
                if len(b.attrs) > 1:
                    p.fail(b, "no-run with other attributes")
                continue
            if "spec" in b.attrs:
                p.spec(b)
            if "excerpt" in b.attrs:
                p.excerpt(b)
            if "run" in b.attrs:
                p.run(b)
        p.finish()
        print(f"{page}: {len(blocks)} blocks" + "".join(f", {v} {k}" for k, v in p.counts.items() if v) +
              ("" if p.failures else "; ok"))
        for k in total:
            total[k] += p.counts[k]
        failures += p.failures
    for w in warnings:
        print(f"warning: {w}")
    for f in failures:
        print(f"FAIL {f}\n")
    print(f"{len(pages)} pages: {total['run']} sessions run, {total['spec']} specs checked, {total['excerpt']} excerpts "
          f"compared, {total['example']} compiled examples; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
