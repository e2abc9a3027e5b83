"""`nox -s tests` runs the suite in two phases (everything else in parallel, then the `alone`
tests one at a time); arguments passed through (`nox -s tests -- ARGS`) must not undo that.
The old session put its own `--alone=exclude` BEFORE the user's arguments, so `-- --alone=only`
ran the `alone` tests side by side in the parallel phase (seen with `--collect-only`), and `--
-n 2` made the alone phase parallel. These call the noxfile's own phase planner, and pytest
itself on the planned arguments (collect only) to see which tests each phase would run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALONE = "tests/gate/test_synthetic_server.py"  # holds a test marked `alone`
OTHER = "tests/serve/test_teardown.py"  # holds none


@pytest.fixture(scope="module")
def noxfile() -> ModuleType:
    """The noxfile, imported once (a second import registers its sessions again: nox warns).
    Importing it puts pyenv's interpreters on PATH: PATH is put back afterwards."""
    loaded = sys.modules.get("stackgate_noxfile")
    if loaded is not None:
        return loaded
    path = os.environ.get("PATH", "")
    spec = importlib.util.spec_from_file_location("stackgate_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        os.environ["PATH"] = path
    sys.modules["stackgate_noxfile"] = module
    return module


def _collected(args: list[str]) -> list[str]:
    """Node ids pytest would run with these arguments (as nox passes them), serially."""
    argv: list[str] = []
    skip = False
    for arg in args:  # collection needs no workers: drop `-n X` and `--dist X`
        if skip:
            skip = False
        elif arg in ("-n", "--dist"):
            skip = True
        else:
            argv.append(arg)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def _value(args: list[str], option: str) -> str:
    """The value pytest takes for `option` given as `--opt=V` or `-o V`: the last one."""
    found = ""
    for i, arg in enumerate(args):
        if arg.startswith(option + "="):
            found = arg.split("=", 1)[1]
        elif arg == option and i + 1 < len(args):
            found = args[i + 1]
    return found


def test_plain_arguments_give_both_phases(noxfile: ModuleType) -> None:
    phases = noxfile.suite_phases([ALONE, OTHER])
    assert len(phases) == 2
    (parallel, _), (serial, codes) = phases
    assert _value(parallel, "--alone") == "exclude" and _value(serial, "--alone") == "only"
    assert _value(serial, "-n") == "0" and codes == [0, 5]
    first, second = _collected(parallel), _collected(serial)
    assert first and all(ALONE not in t for t in first)
    assert second and all(ALONE in t for t in second)


@pytest.mark.parametrize("given", [["--alone=only"], ["--alone", "only"]])
def test_alone_only_runs_the_serial_phase_alone(noxfile: ModuleType, given: list[str]) -> None:
    phases = noxfile.suite_phases([ALONE, OTHER, *given, "-n", "2"])
    assert len(phases) == 1
    args, _ = phases[0]
    assert _value(args, "-n") == "0"  # a user's -n cannot make the alone phase parallel
    assert _value(args, "--alone") == "only"
    assert all(ALONE in t for t in _collected(args))


def test_alone_exclude_runs_the_parallel_phase_alone(noxfile: ModuleType) -> None:
    phases = noxfile.suite_phases([ALONE, OTHER, "--alone=exclude"])
    assert len(phases) == 1
    args, _ = phases[0]
    assert _value(args, "-n") == "auto"
    assert all(ALONE not in t for t in _collected(args))


def test_alone_include_is_refused(noxfile: ModuleType) -> None:
    with pytest.raises(ValueError, match="--alone=include"):
        noxfile.suite_phases(["--alone=include"])


def test_a_user_n_still_sets_the_parallel_phase(noxfile: ModuleType) -> None:
    """`nox -s tests -- -n 0` runs the first phase serially (the noxfile says so)."""
    (parallel, _), _serial = noxfile.suite_phases(["-n", "0"])
    assert _value(parallel, "-n") == "0"
