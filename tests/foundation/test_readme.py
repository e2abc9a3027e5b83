"""The README's promises that a test can keep: the rule table and the set-up commands."""

from __future__ import annotations

import re
from pathlib import Path

from stackgate.rules import load_rules

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_rule_table_matches_rules_file() -> None:
    block = README.split("<!-- rules-table")[1].split("<!-- /rules-table -->")[0]
    rows = re.findall(r"^\| `([^`]+)` \| (error|warning) \| (stack|host) \|$", block, re.M)
    expected = [(r.id, r.severity, "host" if r.needs_host else "stack") for r in load_rules()]
    assert rows == expected


def test_ci_runs_the_readme_test_command() -> None:
    command = ".ci/bootstrap && .tools/bin/nox -s tests lint"
    assert command in README
    assert command in (ROOT / ".ci" / "run").read_text()


def test_the_bad_manifest_example_is_shipped_and_says_what_the_readme_shows() -> None:
    import subprocess
    import sys

    block = README.split("<!-- bad-manifest-example -->")[1].split("```console")[1].split("```")[0]
    lines = [line for line in block.strip().splitlines()]
    command = lines[0].removeprefix("$ ").split()
    assert command[:3] == ["python", "-m", "builder"]
    done = subprocess.run(
        [sys.executable, *command[1:]], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == lines[1:]
