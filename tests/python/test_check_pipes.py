"""scripts/check-pipes.py: which pipelines it flags under pipefail, and which it leaves alone."""
import importlib.util
import os
import unittest

from support import REPO

_spec = importlib.util.spec_from_file_location("check_pipes",
                                               os.path.join(REPO, "scripts", "check-pipes.py"))
check_pipes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_pipes)

HEADER = "#!/usr/bin/env bash\nset -euo pipefail\n"


def flagged(body, header=HEADER):
    """The line numbers of the body (1 = its first line) the checker flags."""
    offset = header.count("\n")
    return [line - offset for line, _ in check_pipes.check(header + body)]


class CheckPipesTest(unittest.TestCase):
    def test_flags_each_reader_that_stops_early(self):
        for line in ["ps aux | head -n1", "x=$(ps aux | head -n1)", "ps aux | grep -q lake",
                     "ps aux | grep -m1 lake", "ps aux | grep --max-count=1 lake",
                     "ps aux | grep -lzxF lake", "ps aux | sed q", "ps aux | sed -n '1p;q'",
                     "ps aux | sed -n '/lake/{p;q}'", "ps aux | awk '{print; exit}'",
                     "ps aux | awk -F, '/lake/ {exit}'", "ps aux | { read -r first; }",
                     "ps aux | cmp -s - before", "ps aux |& head", "ps aux | sudo -n head",
                     "ps aux | LC_ALL=C head -c 10 >&2", 'echo "$(ps aux | grep -q x)"',
                     "x=${y:-$(ps aux | head -n1)}"]:
            with self.subTest(line=line):
                self.assertEqual(flagged(line + "\n"), [1])

    def test_passes_readers_that_read_everything(self):
        for line in ["ps aux | sed -n 1p", "ps aux | awk 'NR == 1'", "ps aux | tail -n1",
                     "ps aux | grep -c lake", "ps aux | grep -v lake | sort",
                     "ps aux | sed 's/q/x/'", "ps aux | awk '{n++} END {print n; exit}'",
                     "ps aux | while read -r l; do :; done", "ps aux | xargs -r head",
                     "ps aux | awk '/lake/ && ++n <= 10'", "grep -q lake <<<\"$(ps aux)\"",
                     "cmp -s <(ps aux) before", "awk '/lake/ {print; exit}' file"]:
            with self.subTest(line=line):
                self.assertEqual(flagged(line + "\n"), [])

    def test_ignores_pipes_in_quotes_comments_here_documents_and_arithmetic(self):
        body = ("echo 'a | head' \"b | head\" $'c\\' | head'\n"
                "# ps | head\n"
                "echo $(( 3 | 4 )); (( x = 1 | 2 ))\n"
                "cat <<EOF\nps | head\nEOF\n"
                "python3 - <<'PY'\nprint(1 | 2) | head\nPY\n"
                "ps aux | head -n1\n")
        self.assertEqual(flagged(body), [10])

    def test_reports_the_reader_line_of_a_pipeline_over_several_lines(self):
        self.assertEqual(flagged("ps aux |\n  grep lake |\n  head -n 3\n"), [3])

    def test_pipe_ok_comment_allows_a_reviewed_pipeline(self):
        self.assertEqual(flagged("ps aux | head -n1  # pipe-ok: its status is not checked\n"), [])
        self.assertEqual(flagged("ps aux | head -n1  # pipe-ok:\n"), [1])  # a reason is needed

    def test_scripts_without_pipefail_are_not_checked(self):
        self.assertEqual(flagged("ps aux | head -n1\n", header="#!/bin/sh\nset -eu\n"), [])
        self.assertEqual(flagged("ps aux | head -n1\n", header="#!/bin/bash\nset -o pipefail\n"),
                         [1])
        self.assertEqual(flagged("ps aux | head -n1\n", header="#!/bin/bash -eo pipefail\n"), [1])


if __name__ == "__main__":
    unittest.main()
