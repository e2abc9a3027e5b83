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
