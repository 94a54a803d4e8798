#!/usr/bin/env python3
"""Fails when a function in wfgen/ or runtime/src/ is longer than 120 lines,
or a file there longer than 1000 (DEVELOPERS: functions <= ~120 lines, files
<= ~1000). ctest runs it as lint.function_length; it takes well under a
second.

A heuristic, not a C++ parser: comments, string and character literals and
preprocessor lines are blanked first; then every `{` is classified by the
text before it (back to the previous `;`, `{` or `}`):
  namespace ... / extern "C"       a scope: searched inside
  class / struct / union ... {     a scope: its inline member functions are found
  anything else ending in `)`,     a function (also a constructor with an
  `) const`, `-> T`, `: init(x)`   initializer list, a lambda at namespace scope)
  anything else (`= {`, enum)      data: skipped
A function's length is from the first line of its signature to its closing
brace, both included (Importer::import_node of operators.cpp measured 342
lines so, as in issue 41). Lambdas and blocks inside a function count toward
the function.

It misses a constructor whose member initializers use braces (`: x_{1} {`),
and counts a function-like macro's body as a function; neither occurs in
wfgen/ today. --selftest checks that it catches what it must on made-up
sources (ctest lint.function_length.selftest).

Usage: scripts/check_function_length.py [--root DIR] [--max-function N] [--max-file N] [--report N] [--selftest]
  --report N  print the N longest functions instead (no limit checked)
"""
import argparse
import bisect
import os
import re
import sys
import tempfile

MAX_FUNCTION = 120
MAX_FILE = 1000
FOLDERS = ("wfgen", os.path.join("runtime", "src"))
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc")
# Files allowed past a limit, with the reason. Keep it empty: split instead.
ALLOW = {}


def blank(text):
    """Comments, literals and preprocessor lines replaced by spaces; newlines kept."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#" or (at_line_start and c in " \t" and text[i:].lstrip(" \t").startswith("#")):
            # A preprocessor line, with its backslash continuations.
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
            continue
        out.append(c)
        at_line_start = c == "\n" or (at_line_start and c in " \t")
        i += 1
    return "".join(out)


def functions(text):
    """(name, first line, last line) of each function of a C++ source."""
    code = blank(text)
    newlines = [i for i, c in enumerate(code) if c == "\n"]

    def line_of(i):
        return bisect.bisect_left(newlines, i) + 1
    found = []
    # The open braces: (kind, first line, name); kind is scope, function, block or data.
    stack = []
    head_start = 0  # where the text before the next brace begins
    for i, c in enumerate(code):
        if c == ";":
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            kind, name = "data", ""
            if any(k != "scope" for k, _, _ in stack):
                kind = "block"
            elif re.match(r"\s*(inline\s+)?namespace\b", head) or re.match(r"\s*extern\s*$", head):
                kind = "scope"
            elif re.search(r"\b(class|struct|union)\b[^()=]*$", head):
                kind = "scope"
            elif re.search(r"\)[\s\w]*(->[^{}]*)?$", head) or re.search(r"\)\s*:[^;]*\)\s*$", head):
                kind = "function"
                m = re.search(r"([~\w:]+)\s*\(", head)
                name = m.group(1) if m else "?"
            elif re.search(r"\]\s*$", head):  # a lambda without parameters: `auto f = [] {`
                kind = "function"
                m = re.search(r"(\w+)\s*=\s*\[", head)
                name = m.group(1) if m else "lambda"
            first = head_start + len(head) - len(head.lstrip())
            stack.append((kind, line_of(first), name))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    found.append((name, first, line_of(i)))
            head_start = i + 1
    return found


def check(root, max_function, max_file):
    """(problems, every function as (length, file, first line, name))."""
    problems, every = [], []
    for folder in FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames.sort()
            for f in sorted(filenames):
                if not f.endswith(EXTENSIONS):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                n_lines = text.count("\n")
                if n_lines > max_file and rel not in ALLOW:
                    problems.append("%s: %d lines (files: at most %d)" % (rel, n_lines, max_file))
                for name, first, last in functions(text):
                    length = last - first + 1
                    every.append((length, rel, first, name))
                    if length > max_function and (rel, name) not in ALLOW:
                        problems.append("%s:%d: %s is %d lines (functions: at most %d)" % (rel, first, name, length, max_function))
    return problems, every


def selftest():
    """Made-up sources: each long function and file is caught, nothing else."""
    body = lambda n: "".join("  x += %d;  // }\n" % k for k in range(n))
    sources = {
        # 121 lines from the signature's first line to the closing brace.
        "wfgen/a.cpp": "namespace wfgen {\nnamespace {\nint too_long(int x,\n             int y) {\n" + body(117) + "  return x;\n}\n"
                       "int fits() {\n" + body(117) + "  return 0;\n}\n}  // namespace\n}  // namespace wfgen\n",
        # A member function defined in its class, braces in strings and
        # comments, an initializer list and a table.
        "wfgen/b.hpp": "struct S {\n  S() : v_(0) {}\n  int member() const {\n    const char* s = \"{{{\";\n    /* { */\n" + body(117) +
                       "    return 0;\n  }\n  int v_;\n};\nconst int kTable[] = {\n" + "1,\n" * 200 + "};\n",
        "runtime/src/c.cpp": "// long\n" * 1001,
        "wfgen/d.cpp": "auto f = [] {\n" + body(130) + "};\nvoid g() {\n  auto h = [] {\n" + body(130) + "  };\n}\n",
    }
    want = ["runtime/src/c.cpp: 1001 lines", "wfgen/a.cpp:3: too_long is 121 lines", "wfgen/b.hpp:3: member is 122 lines",
            "wfgen/d.cpp:1: f is 132 lines", "wfgen/d.cpp:133: g is 134 lines"]
    with tempfile.TemporaryDirectory() as root:
        for rel, text in sources.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        problems, _ = check(root, MAX_FUNCTION, MAX_FILE)
    got = sorted(p.split(" (")[0] for p in problems)
    want = sorted(want)
    if got != want:
        print("check_function_length: selftest FAILED\n  expected %s\n  got      %s" % (want, got))
        return 1
    print("check_function_length: selftest ok (%d problems found, as expected)" % len(want))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--max-function", type=int, default=MAX_FUNCTION)
    ap.add_argument("--max-file", type=int, default=MAX_FILE)
    ap.add_argument("--report", type=int, default=0)
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    problems, every = check(args.root, args.max_function, args.max_file)
    if args.report:
        for length, rel, first, name in sorted(every, reverse=True)[: args.report]:
            print("%5d  %s:%d %s" % (length, rel, first, name))
        return 0
    for p in problems:
        print(p)
    if problems:
        print("check_function_length: %d over the limits: split along what the code does (named helpers)" % len(problems))
        return 1
    print("check_function_length: %d functions in %s, none over %d lines, no file over %d"
          % (len(every), " and ".join(FOLDERS), args.max_function, args.max_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
