"""An integer thousands of digits long in a TOML file (manifest, uv.lock, rules): CPython's
int() refuses more than 4,300 digits with a bare ValueError, which tomllib lets through and
which surfaced as a traceback (exit 1). Bad input naming the file, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import BadInput, ManifestError
from stackgate.lock.uvlock import parse_uv_lock
from stackgate.manifest.rules import load_rules

ROOT = Path(__file__).resolve().parents[2]
SMOKE = (ROOT / "tests/builder/data/smoke.toml").read_text()
ENDLESS = "9" * 5000


def test_a_manifest_with_an_endless_integer_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "smoke.toml"
    path.write_text(SMOKE.replace("schema_version = 1", f"schema_version = {ENDLESS}"))
    done = subprocess.run(
        [sys.executable, "-m", "builder", "check", str(path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "smoke.toml: invalid TOML" in done.stderr and "Traceback" not in done.stderr


def test_a_lock_and_a_rules_file_with_an_endless_integer_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as caught:
        parse_uv_lock(f"version = {ENDLESS}\n", where="stacks/locks/x/uv.lock")
    assert caught.value.message.startswith("stacks/locks/x/uv.lock: not valid TOML")
    rules = tmp_path / "rules.toml"
    rules.write_text(f"schema_version = {ENDLESS}\n")
    with pytest.raises(ManifestError):
        load_rules(rules)
