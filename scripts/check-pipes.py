#!/usr/bin/python3
"""check-pipes.py [FILE...]: finds pipelines that can fail for no reason under `set -o pipefail`.

A reader that exits before its input ends (`head`, `grep -q`, `grep -m N`, `sed q`, `awk '... exit'`,
`read`, `cmp`) leaves its writer to die of SIGPIPE on the next write, and pipefail turns that into a
failed pipeline (status 141): under `set -e` the script ends there, without a word. Whether it
happens depends on timing and on how much the writer writes, so such a line passes in one run and
fails the next. Read everything instead (`sed -n 1p`, `awk 'NR == 1'`, `awk '/x/ && ++n <= 10'`),
or test a captured value (`grep -q x <<<"$out"`).

Checks the shell scripts git tracks (*.sh, *.bash, or a sh/bash shebang; every file outside a git
checkout) that enable pipefail, or the FILEs given. Prints FILE:LINE and why for each such pipeline; exits 1 if there is any. A reviewed
exception carries `# pipe-ok: REASON` on one of the pipeline's lines.
"""
import os
import re
import shlex
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SHEBANG = re.compile(rb"^#!\s*(\S*/)?(env\s+)?(ba|da|k|z)?sh\b")
PIPEFAIL = re.compile(r"^[ \t]*set\b[^#\n]*(-[a-z]*o[ \t]+pipefail|-o[ \t]+pipefail)", re.M)
PIPE_OK = re.compile(r"#.*\bpipe-ok:\s*\S")
# Words that run the next word as the command: `| sudo head` is `head`.
WRAPPERS = {"command", "exec", "env", "sudo", "nice", "nohup", "stdbuf", "time", "!", "{", "("}


def repo_files():
    """The files git tracks, or outside a checkout every file but the build's and node_modules'."""
    try:
        out = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        return [name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for folder, dirs, files in os.walk(REPO):
            if folder == REPO:
                dirs[:] = [d for d in dirs if not d.startswith(("build", "node_modules", "."))]
            names += [os.path.relpath(os.path.join(folder, f), REPO) for f in files]
        return sorted(names)


def shell_scripts():
    for name in repo_files():
        path = os.path.join(REPO, name)
        if not os.path.isfile(path):
            continue
        if name.endswith((".sh", ".bash")):
            yield name
            continue
        with open(path, "rb") as f:
            if SHEBANG.match(f.readline(200)):
                yield name


class Scanner:
    """Walks a script once, as bash would split it: quotes, $(...), ${...}, $((...)), comments and
    here-documents. Records each pipe `|` outside quotes and arithmetic, with the text after it up
    to the end of its command, and the comments by line."""

    def __init__(self, text):
        self.s = text
        self.pipes = []  # (offset of the |, offset after the reader's command)
        self.comments = {}  # line number -> comment text

    def line_of(self, i):
        return self.s.count("\n", 0, i) + 1

    def scan(self):
        self.code(0, None)
        return self

    def code(self, i, close):
        """Shell code from i until `close` (")" or "`") or the end; returns the offset after it."""
        s, n = self.s, len(self.s)
        heredocs = []
        while i < n:
            c = s[i]
            if close and s.startswith(close, i):
                return i + len(close)
            if c == "\\":
                i += 2
            elif s.startswith("$'", i):
                i = self.ansi_c(i + 2)
            elif c == "'":
                i = self.quoted(i + 1)
            elif c == '"':
                i = self.double(i + 1)
            elif c == "`":
                i = self.code(i + 1, "`")
            elif s.startswith("$((", i) or (s.startswith("((", i) and self.word_start(i)):
                i = self.arith(i + (3 if c == "$" else 2))
            elif s.startswith("${", i):
                i = self.param(i + 2)
            elif s.startswith("$(", i) or c == "(":
                i = self.code(i + (2 if c == "$" else 1), ")")
            elif c == "#" and self.word_start(i):
                end = s.find("\n", i)
                end = n if end < 0 else end
                self.comments[self.line_of(i)] = s[i:end]
                i = end
            elif s.startswith("<<", i) and not s.startswith("<<<", i):
                m = re.match(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", s[i:])
                if m:
                    heredocs.append((m.group(1) == "-", m.group(3)))
                    i += m.end()
                else:
                    i += 2
            elif c == "\n":
                i = self.skip_heredocs(i + 1, heredocs)
                heredocs = []
            elif c == "|" and s.startswith("||", i):
                i += 2
            elif c == "|":
                start = i
                i += 2 if s.startswith("|&", i) else 1
                self.pipes.append((start, self.command_end(i)))
            else:
                i += 1
        return i

    def word_start(self, i):
        return i == 0 or self.s[i - 1] in " \t\n;&|(){}"

    def quoted(self, i):
        end = self.s.find("'", i)
        return len(self.s) if end < 0 else end + 1

    def ansi_c(self, i):  # $'...', where \' does not end it
        s, n = self.s, len(self.s)
        while i < n and s[i] != "'":
            i += 2 if s[i] == "\\" else 1
        return i + 1

    def double(self, i):
        s, n = self.s, len(self.s)
        while i < n and s[i] != '"':
            if s[i] == "\\":
                i += 2
            elif s.startswith("$((", i):
                i = self.arith(i + 3)
            elif s.startswith("${", i):
                i = self.param(i + 2)
            elif s.startswith("$(", i):
                i = self.code(i + 2, ")")
            elif s[i] == "`":
                i = self.code(i + 1, "`")
            else:
                i += 1
        return i + 1

    def param(self, i):
        s, n, depth = self.s, len(self.s), 1
        while i < n:
            if s[i] == "\\":
                i += 2
                continue
            if s[i] == "'":
                i = self.quoted(i + 1)
                continue
            if s[i] == '"':
                i = self.double(i + 1)
                continue
            if s.startswith("$(", i) and not s.startswith("$((", i):
                i = self.code(i + 2, ")")
                continue
            depth += {"{": 1, "}": -1}.get(s[i], 0)
            i += 1
            if depth == 0:
                break
        return i

    def arith(self, i):
        s, n, depth = self.s, len(self.s), 2
        while i < n and depth > 0:
            if s.startswith("$(", i) and not s.startswith("$((", i):
                i = self.code(i + 2, ")")
                continue
            depth += {"(": 1, ")": -1}.get(s[i], 0)
            i += 1
        return i

    def skip_heredocs(self, i, heredocs):
        for strip_tabs, word in heredocs:
            while i < len(self.s):
                end = self.s.find("\n", i)
                end = len(self.s) if end < 0 else end
                line = self.s[i:end]
                i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == word:
                    break
        return i

    def command_end(self, i):
        """The end of the command that starts at i: the next |, ;, &, newline, or a closing
        parenthesis or backquote, outside quotes and nested code."""
        s, n = self.s, len(self.s)
        while i < n and s[i] in " \t\n\\":  # `a |` at a line's end continues on the next
            i += 1
        while i < n:
            c = s[i]
            redirect = c == "&" and (s[i - 1] in "<>" or s.startswith("&>", i))
            if (c in "|;&\n)`" and not redirect) or (c == "#" and self.word_start(i)):
                return i
            if c == "\\":
                i += 2
            elif c == "'":
                i = self.quoted(i + 1)
            elif c == '"':
                i = self.double(i + 1)
            elif s.startswith("$((", i):
                i = self.arith(i + 3)
            elif s.startswith("${", i):
                i = self.param(i + 2)
            elif s.startswith(("$(", "<(", ">("), i):
                i = self.code(i + 2, ")")
            else:
                i += 1
        return i


def words(text):
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def reader_problem(text):
    """Why the command `text`, reading a pipe, may exit before its input ends; None if it reads
    all of it."""
    w = words(text)
    while w and (w[0] in WRAPPERS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w[0])):
        w = w[1:]
        while w and w[0].startswith("-"):  # the wrapper's own options (sudo -n, stdbuf -oL)
            w = w[1:]
    if not w:
        return None
    cmd, args = os.path.basename(w[0]), w[1:]
    opts = [a for a in args if a.startswith("-") and a != "-"]
    if cmd == "head":
        return "head stops reading after its first lines"
    if cmd in ("grep", "egrep", "fgrep"):
        for o in opts:
            if o in ("--quiet", "--silent", "--files-with-matches", "--files-without-match") or \
                    o.startswith("--max-count"):
                return f"grep {o} stops reading early"
            if not o.startswith("--") and re.search(r"[qlLm]", o[1:].split("=")[0]):
                return f"grep {o} stops reading early (-q, -l, -L or -m)"
        return None
    if cmd == "sed":
        scripts = sed_scripts(args)
        if any(re.search(r"(^|[;{}\s/\d$])[qQ]\s*\d*\s*($|[;}\n])", p) for p in scripts):
            return "sed's q command stops reading early"
        return None
    if cmd in ("awk", "gawk", "mawk", "nawk"):
        program = awk_program(args)
        before_end = re.split(r"\bEND\s*\{", program)[0]
        if re.search(r"\bexit\b", before_end):
            return "awk's exit stops reading early"
        return None
    if cmd == "read":
        return "read takes one line and leaves the rest"
    if cmd == "cmp":
        return "cmp stops reading at the first difference"
    return None


def awk_program(args):
    """The program text of an awk command line ("" when it comes from a file: -f)."""
    it = iter(args)
    for a in it:
        if a in ("-F", "-v"):
            next(it, None)
        elif a == "-f" or a.startswith("-f") and not a.startswith("-F"):
            return ""
        elif not a.startswith("-"):
            return a
    return ""


def sed_scripts(args):
    """The scripts of a sed command line: each -e's, or else the first operand."""
    scripts, it, explicit = [], iter(args), False
    for a in it:
        if a in ("-e", "--expression"):
            scripts.append(next(it, ""))
            explicit = True
        elif a.startswith("--expression="):
            scripts.append(a.split("=", 1)[1])
            explicit = True
        elif a.startswith("-e") and len(a) > 2:
            scripts.append(a[2:])
            explicit = True
        elif a in ("-f", "--file", "-l", "--line-length"):
            next(it, None)
        elif not a.startswith("-") and not explicit:
            scripts.append(a)
            break
    return scripts


def enables_pipefail(text):
    return bool(PIPEFAIL.search(text) or re.match(r"#![^\n]*\s-[a-z]*o\s+pipefail", text))


def check(text):
    """The findings in one script: (line, why)."""
    if not enables_pipefail(text):
        return []
    scanner = Scanner(text).scan()
    findings = []
    for pipe, end in scanner.pipes:
        start = pipe + 1
        while start < end and text[start] in "&\\ \t\n":
            start += 1
        reader = " ".join(text[start:end].replace("\\\n", " ").split())
        why = reader_problem(reader)
        if why is None:
            continue
        first, last = scanner.line_of(pipe), scanner.line_of(end)
        if any(PIPE_OK.search(scanner.comments.get(n, "")) for n in range(first, last + 1)):
            continue
        findings.append((scanner.line_of(start), f"'| {reader}' under pipefail: {why}; its "
                                                 "writer may die of SIGPIPE (status 141)"))
    return findings


def main(argv):
    names = argv[1:] or list(shell_scripts())
    base = os.getcwd() if argv[1:] else REPO
    count, checked = 0, 0
    for name in names:
        with open(os.path.join(base, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        checked += enables_pipefail(text)
        for line, why in check(text):
            print(f"{name}:{line}: {why}")
            count += 1
    if count:
        print(f"check-pipes: {count} pipeline(s) can fail for no reason under pipefail; read all "
              "input (sed -n 1p, awk 'NR == 1'), or mark a reviewed one `# pipe-ok: REASON`")
        return 1
    print(f"check-pipes: {len(names)} scripts, {checked} with pipefail: no pipeline ends in a "
          "reader that stops early")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
