#!/usr/bin/env bash
# Fails when a comment of a kernel source holds a measured figure or a commit hash. Kernel
# comments say why a design is right; what a run measured, and at which commit, lives in
# bench/results/ (the tuning values' figures in kernels-h200.md, "Tuning notes"), where it
# keeps its date, machine and same-run peers. Only comments count: code, string and character
# literals are skipped, so hex constants, `2^28`, `sm_90` and printf's '%' pass.
#
# Flagged in a comment:
#   - a number with a time or bandwidth unit: 245 us, 1.5 ms, 4,291 GB/s, 3.3 TB/s (also
#     µs, MB/s, GiB/s);
#   - a percentage: 3%, 80 %;
#   - "measured" followed, in the same sentence, by "us";
#   - a commit hash: a word of 7 to 40 hex digits with at least one digit and one letter
#     (a73584a, fd00965).
#
# usage: scripts/check-kernel-comments.sh [PATH...]
#   PATH: files or folders to check (default: kernels/); folders are searched for
#   *.cu *.cuh *.h *.hpp *.cc *.cpp. Exit status 1 when anything is flagged, each finding
#   printed as path:line: what: the comment's text.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  set -- kernels
fi
exec python3 - "$@" <<'PY'
import os
import re
import sys

SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cc", ".cpp")
NUMBER = r"(?<![\w.^])\d+(?:[.,]\d+)*"
CHECKS = [
    ("measured figure", re.compile(NUMBER + r"\s*(?:us|µs|ms|[MGT]i?B/s)(?![\w/])")),
    ("percentage", re.compile(NUMBER + r"\s?%")),
    ("measured time", re.compile(r"\bmeasured\b[^.;]*?\bus\b")),
    ("commit hash", re.compile(r"(?<!\w)(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?!\w)")),
]


def comments(text):
    """Yields (line, comment text) for every // and /* */ comment of C++/CUDA source `text`,
    one item per source line of a block comment; string, character and raw string literals
    are skipped."""
    i, n, line = 0, len(text), 1
    ident = lambda c: c.isalnum() or c == "_"
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield line, text[i + 2:end]
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                yield line + k, part
            line += text.count("\n", i, end)
            i = end + 2
        elif c == '"' and i > 0 and text[i - 1] == "R" and (i < 2 or not ident(text[i - 2]) or
                                                           text[i - 2] in "8LuU"):
            open_paren = text.find("(", i)
            delim = text[i + 1:open_paren]
            end = text.find(")" + delim + '"', open_paren)
            end = n if end < 0 else end + len(delim) + 2
            line += text.count("\n", i, end)
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # A string or character literal (a ' after a digit or letter is a digit separator
            # or part of a prefixed literal's name, e.g. 1'000).
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for name in sorted(names):
                    if name.endswith(SUFFIXES):
                        yield os.path.join(root, name)
        else:
            yield p


checked, found = 0, 0
for path in files(sys.argv[1:]):
    checked += 1
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for line, comment in comments(text):
        for what, pattern in CHECKS:
            m = pattern.search(comment)
            if m:
                print(f"{path}:{line}: {what} ({m.group(0)!r}) in a comment: {comment.strip()}")
                found += 1
                break
if found:
    print(f"check-kernel-comments: {found} comment line(s) with a measured figure or commit hash "
          f"in {checked} files; say why in the comment and put the figures in bench/results/")
    sys.exit(1)
print(f"check-kernel-comments: {checked} files, no measured figure or commit hash in a comment")
PY
