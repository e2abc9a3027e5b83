"""The pin helper's compiler and headers are never chosen by the caller's environment.

A planted `cc` (first on PATH, or in the working folder reached through an empty PATH entry)
and a planted <slurm/slurm.h> (through CPATH / C_INCLUDE_PATH) are real files here; the
control cases show each plant works on a compiler run the ordinary way, so the tests can fail.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from stackgate import compiler
from validators.fleet.slurm import pin

HAVE_HEADERS = compiler.can_include("slurm/slurm.h")
SYSTEM_CC = next((c for c in compiler.SYSTEM_COMPILERS if Path(c).exists()), None)
pytestmark = pytest.mark.skipif(SYSTEM_CC is None, reason="no system C compiler")


def _planted_cc(folder: Path, marker: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cc = folder / "cc"
    cc.write_text(f"#!/bin/sh\necho planted >> {marker}\nexit 1\n")
    cc.chmod(cc.stat().st_mode | stat.S_IXUSR)
    return cc


def _planted_header(folder: Path) -> Path:
    (folder / "slurm").mkdir(parents=True)
    (folder / "slurm" / "slurm.h").write_text("#error PLANTED_HEADER\n")
    return folder


def test_a_planted_cc_on_path_or_in_the_working_folder_is_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    _planted_cc(tmp_path / "bin", marker)
    _planted_cc(tmp_path / "cwd", marker)
    monkeypatch.chdir(tmp_path / "cwd")
    # first on PATH, then an empty entry (the working folder), then a relative one
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}::.:/usr/bin:/bin")
    assert compiler.find_compiler() == Path(SYSTEM_CC or "")
    work = tmp_path / "work"
    work.mkdir()
    try:
        pin.build_helper(work)
    except pin.PinHelperUnavailable as exc:
        assert not HAVE_HEADERS, exc
    assert not marker.exists(), "a planted cc ran"


@pytest.mark.skipif(not HAVE_HEADERS, reason="no libslurm headers (libslurm-dev)")
@pytest.mark.parametrize("var", ["CPATH", "C_INCLUDE_PATH"])
def test_a_header_planted_through_the_include_variables_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    planted = _planted_header(tmp_path / "inc")
    # control: the ordinary compiler run with the caller's environment reads the plant
    source = pin.source_path()
    control = subprocess.run(
        [SYSTEM_CC or "cc", "-fsyntax-only", str(source)],
        env={**os.environ, var: str(planted)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert "PLANTED_HEADER" in control.stderr
    monkeypatch.setenv(var, str(planted))
    monkeypatch.setenv("GCC_EXEC_PREFIX", str(tmp_path / "nowhere/"))
    work = tmp_path / "work"
    work.mkdir()
    binary = pin.build_helper(work)
    assert binary.is_file()


def test_an_explicit_cc_must_be_absolute_and_is_the_one_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    cc = _planted_cc(tmp_path / "bin", marker)
    with pytest.raises(compiler.CompilerUnavailable, match="absolute"):
        compiler.find_compiler("cc")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(pin.PinHelperUnavailable):
        pin.build_helper(work, str(cc))
    assert marker.read_text() == "planted\n"  # named on purpose: it ran, once


def test_a_dry_run_plan_compiles_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    cc = _planted_cc(tmp_path / "bin", marker)
    with pin.choose_pin_way(True, "auto", str(cc), build=False) as way:
        assert way.helper is None
        assert way.way == ("libslurm" if HAVE_HEADERS else "scontrol")
    assert not marker.exists()
    with pin.choose_pin_way(True, "auto", str(cc)) as way:  # control: the real submit compiles
        assert way.way == "scontrol"
    assert marker.exists()
