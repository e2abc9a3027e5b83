"""The README's and docs' promises that a test can keep: the rule table, the test command, the
bad-manifest example. (The README's commands themselves run in test_readme_commands.py.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from stackgate.manifest.rules import load_rules

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MANIFEST_DOC = (ROOT / "docs" / "manifest.md").read_text()


def test_rule_table_matches_rules_file() -> None:
    block = MANIFEST_DOC.split("<!-- rules-table")[1].split("<!-- /rules-table -->")[0]
    rows = re.findall(r"^\| `([^`]+)` \| (error|warning) \| (stack|host) \|$", block, re.M)
    expected = [(r.id, r.severity, "host" if r.needs_host else "stack") for r in load_rules()]
    assert rows == expected


def test_ci_runs_the_readme_test_command() -> None:
    command = ".ci/bootstrap && .tools/bin/nox -s tests lint"
    block = README.split("<!-- test-commands")[1].split("<!-- /test-commands -->")[0]
    assert command in block
    assert command in (ROOT / ".ci" / "run").read_text()


def test_the_bad_manifest_example_is_shipped_and_says_what_the_readme_shows() -> None:
    for text in (README, (ROOT / "docs" / "commands.md").read_text()):
        block = text.split("<!-- bad-manifest-example -->")[1].split("```console")[1].split("```")[0]
        lines = [line for line in block.strip().splitlines()]
        command = lines[0].removeprefix("$ ").split()
        # `.tools/bin/uv run stackgate check ...` (README) or `stackgate check ...` (docs): the
        # same command; test_readme_commands.py runs the README's through uv as typed.
        words = command[command.index("stackgate") + 1 :]
        assert words[0] == "check"
        done = subprocess.run(
            [sys.executable, "-m", "builder", *words],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == lines[1:]
