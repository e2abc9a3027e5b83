"""`diff` of a stack against a record, on the committed h200-sglang stack and record: a stack
names only its pins and a record every installed version, so the record's other packages are
neither "added" nor "removed" (they were all shown as added): the pins are compared, and one
line says how many installed versions were left out. Either order; a changed pin is named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = "records/h200-sglang/20261202T011853-034d1e7a9e43.json"


def _diff(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STACKGATE_STATE_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "validators", "diff", *args, "--json"],
        cwd=ROOT,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_stack_against_its_record_compares_the_pins_only() -> None:
    recorded = json.loads((ROOT / RECORD).read_text())["build"]["raw"]["packages"]
    for args, first in (
        ((("h200-sglang", RECORD)), "stack"),
        (((RECORD, "h200-sglang")), "record"),
    ):
        done = _diff(*args)
        assert done.returncode == 0, done.stderr
        last = done.stderr.splitlines()[-1]
        assert last.startswith("OK diff "), last
        assert ": 0 pinned package version(s), 0 environment variable(s), " in last, last
        payload = json.loads(done.stdout)
        assert payload["versions"] == []
        note = payload["versions_pins_only"]
        assert note is not None and f"the other {len(recorded) - 5} installed" in note, note
        assert note in done.stderr
        assert payload["a" if first == "stack" else "b"] == "stack h200-sglang"


def test_a_changed_pin_is_named_and_unpinned_packages_are_not(tmp_path: Path) -> None:
    text = (ROOT / "stacks" / "h200-sglang.toml").read_text()
    recorded = json.loads((ROOT / RECORD).read_text())["build"]["raw"]["packages"]
    old = recorded["sglang"]
    assert f'version = "{old}"' in text
    mine = tmp_path / "h200-sglang.toml"
    mine.write_text(text.replace(f'version = "{old}"', 'version = "0.5.99"', 1))
    done = _diff(RECORD, str(mine))
    assert done.returncode == 0, done.stderr
    assert ": 1 pinned package version(s), " in done.stderr.splitlines()[-1], done.stderr
    changes = json.loads(done.stdout)["versions"]
    assert changes == [{"key": "sglang", "kind": "changed", "a": old, "b": "0.5.99"}]
