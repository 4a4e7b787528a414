#!/usr/bin/env python3
"""Keeps src/ easy to change: no file over 500 lines, no function over 80.

A function may be longer when the comment right above it says why, in a line that starts with
"// Long:" (e.g. "// Long: one switch over every FUSE opcode; split, it would hide the table").
Functions are found the way Google style lays them out: a definition starts at column 0 (or, in a
class body, at its indentation) with a line ending in "{" that is not a namespace, class, struct,
enum or initializer, and ends at the first "}" at the same indentation. Lambdas count toward the
function they are in.

  scripts/check-sizes.py [ROOT]     exit 1 and one line per breach, else a summary line
"""
import os
import re
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
NOT_A_FUNCTION = re.compile(
    r"^\s*(namespace\b|class\b|struct\b|enum\b|union\b|extern\b|template\s*<[^>]*>\s*(class|struct)\b)"
    r"|=\s*\{$|^\s*(static\s+)?(constexpr\s+|const\s+|inline\s+)*[\w:<>, *&]+\s+\w+(\[\w*\])?\s*=\s*")
CONTROL = re.compile(r"^\s*(if|for|while|switch|do|else|try|catch)\b")


def functions(lines):
    """Yields (first line number, length, name line) of each function definition."""
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if (stripped.endswith("{") and not stripped.startswith(("//", "#", "}"))
                and not NOT_A_FUNCTION.search(line) and not CONTROL.match(line)
                and indent <= 2 and "(" in "".join(l.strip() for l in lines[max(0, i - 3):i + 1])):
            close = " " * indent + "}"
            j = i + 1
            while j < len(lines) and not lines[j].rstrip("\n").startswith(close):
                if lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) < indent:
                    break  # left the scope: not a body we understand
                j += 1
            if j < len(lines) and lines[j].rstrip("\n").startswith(close):
                # The signature may span lines above: its first line is the first after a blank,
                # a comment, a "}" or a ";".
                start = i
                while start > 0:
                    prev = lines[start - 1].strip()
                    if not prev or prev.startswith("//") or prev.endswith((";", "}", "{")) or prev.startswith("#"):
                        break
                    start -= 1
                yield start, j - start + 1
                i = j + 1
                continue
        i += 1


def reason_above(lines, start):
    k = start - 1
    while k >= 0 and lines[k].strip().startswith("//"):
        if lines[k].strip().startswith("// Long:"):
            return True
        k -= 1
    return False


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(root, "src")
    breaches, files, funcs = [], 0, 0
    for dirpath, _, names in sorted(os.walk(src)):
        for name in sorted(names):
            if not name.endswith((".cc", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path) as f:
                lines = f.readlines()
            files += 1
            if len(lines) > MAX_FILE_LINES:
                breaches.append(f"{rel}: {len(lines)} lines (at most {MAX_FILE_LINES})")
            for start, length in functions(lines):
                funcs += 1
                if length > MAX_FUNCTION_LINES and not reason_above(lines, start):
                    breaches.append(f"{rel}:{start + 1}: a function of {length} lines (at most "
                                    f"{MAX_FUNCTION_LINES}, or a '// Long:' comment above it saying why)")
    for b in breaches:
        print(b)
    if breaches:
        print(f"check-sizes: {len(breaches)} breach(es) in {files} files", file=sys.stderr)
        return 1
    print(f"check-sizes: {files} files, {funcs} functions, none too long")
    return 0


if __name__ == "__main__":
    sys.exit(main())
