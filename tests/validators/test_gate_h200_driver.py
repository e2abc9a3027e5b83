"""benchmarks/gate_h200/gate_h200.sh, the lent-H200 gate driver (one script, a mode per machine run),
runs only on a GPU machine; here its argument parsing and each mode's plan run for real on
CPU (--dry-run), and every step a mode names must be a function the script defines."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gate_h200" / "gate_h200.sh"
MODES = ("loop", "reproduce", "abba", "prereg")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False, env={"PATH": "/usr/bin:/bin", **(env or {})})  # fmt: skip


def test_the_script_parses() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_plans_steps_the_script_defines(mode: str, tmp_path: Path) -> None:
    done = _run(mode, "--dry-run", env={"RES": str(tmp_path / "res"), "PREREG": "abc1234"})
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    steps = lines["steps"].split()
    defined = set(re.findall(r"^([a-z_0-9]+)\(\) \{", SCRIPT.read_text(), re.M))
    assert steps and not set(steps) - defined, set(steps) - defined
    assert f"mode={mode} " in done.stdout and f"res={tmp_path / 'res'}" in done.stdout
    if mode == "prereg":
        assert "prereg=abc1234" in done.stdout and steps[0] == "policy_shown"
    assert not (tmp_path / "res").exists()  # a dry run makes nothing


def test_defaults_differ_by_machine_as_the_drivers_did(tmp_path: Path) -> None:
    out = {m: _run(m, "--dry-run").stdout for m in MODES}
    assert "res=/tmp/sg/machine4" in out["prereg"] and "res=/tmp/sg/res" in out["abba"]
    assert f"carry={ROOT}/.carry/gpu2" in out["abba"] and f"carry={ROOT.parent} " in out["loop"]


@pytest.mark.parametrize(
    "argv", [(), ("nope",), ("--dry-run",), ("abba", "--now"), ("abba", "--dry-run", "x")]
)
def test_bad_arguments_exit_2_with_the_usage(argv: tuple[str, ...]) -> None:
    done = _run(*argv)
    assert (
        done.returncode == 2
        and "usage: bash" in done.stderr
        and "loop|reproduce|abba|prereg" in done.stderr
    )
    assert done.stdout == ""
