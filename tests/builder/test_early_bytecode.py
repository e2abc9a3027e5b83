"""Byte-code compiled during the install (builder.venv.early_bytecode), against real
`python -m compileall` runs (builder.venv.bytecode.compile_site, what the build ran before):
the same `.pyc` bytes and the same record whatever was compiled early, a source changed after
its early compile compiled again, a `.pyc` a RECORD lists or something rewrote compiled again,
one for a source compileall does not reach removed, and a worker that dies an
EnvironmentProblem."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from builder.venv import bytecode
from builder.venv.early_bytecode import EarlyBytecode, compileall_sources
from stackgate.digests import key_of
from stackgate.early_digests import MARGIN_NS, Early
from stackgate.errors import EnvironmentProblem

RECORDED_AS = Path("/opt/envs/demo/lib/python3/site-packages")
SITE = "lib/python3/site-packages"


def _runner(
    argv: Sequence[str], env: Mapping[str, str], on_line: Callable[[str], None]
) -> tuple[int, list[str]]:
    done = subprocess.run(list(argv), env=dict(env), capture_output=True, text=True, timeout=300)
    lines = (done.stdout + done.stderr).splitlines()
    for line in lines:
        on_line(line)
    return done.returncode, lines[-40:]


def _tree(env: Path) -> Path:
    """Set constants (marshalled in hash order), nested packages, a source Python 3 cannot
    compile, a linked folder compileall does not enter, a `.py` that is a folder."""
    site = env / SITE
    (site / "pkg" / "sub").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text('"""Doc."""\nNAMES = {"alpha", "beta", "gamma"}\n')
    (site / "pkg" / "sub" / "__init__.py").write_text("")
    (site / "pkg" / "sub" / "mod.py").write_text(
        "def f(x):\n    return x in {'a', 'b', 'c', 'd'} or (lambda y: y)(x)\n"
    )
    for n in range(12):
        (site / "pkg" / f"m{n}.py").write_text(f"VALUE = {n}\nKEYS = {{'k{n}', 'j{n}', 'x'}}\n")
    (site / "pkg" / "py2_only.py").write_text('print "hello"\n')
    (site / "odd.py").mkdir()
    outside = env / "outside"
    outside.mkdir()
    (outside / "mod.py").write_text("OUT = 1\n")
    (site / "linked").symlink_to(outside)
    return site


def _pyc(source: Path) -> Path:
    """The .pyc path this interpreter writes for source."""
    return Path(importlib.util.cache_from_source(str(source)))


def _pycs(site: Path) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in site.rglob("*.pyc")}


def _early(path: Path) -> Early:
    """The early reader's entry for a file read now (written long enough before)."""
    return Early(key_of(path.lstat()), time.time_ns(), b"", b"")


def _compiler(site: Path, jobs: int = 2) -> EarlyBytecode:
    env = {**os.environ, "PYTHONHASHSEED": "777"}  # the workers set their own seed
    return EarlyBytecode(Path(sys.executable), site, RECORDED_AS, jobs, env, lambda _l: None)


def _offer_all(compiler: EarlyBytecode, env: Path, site: Path) -> None:
    time.sleep(2 * MARGIN_NS / 1e9)
    for path in sorted(site.rglob("*.py")):
        if path.is_file() and "linked" not in path.parts:
            compiler.offer(str(path.relative_to(env)), _early(path))


def test_same_bytes_and_record_as_compileall_whatever_was_compiled_early(tmp_path: Path) -> None:
    ref_site = _tree(tmp_path / "ref")
    site = _tree(tmp_path / "env")
    compiler = _compiler(site)
    try:
        _offer_all(compiler, tmp_path / "env", site)
        compiler._drain()
        # after the early compile: a source rewritten (same size), a new one, a wheel's .pyc
        # written over ours, and one left as it was
        for root in (ref_site, site):
            (root / "pkg" / "m1.py").write_text("VALUE = 9\nKEYS = {'k1', 'j1', 'y'}\n")
            (root / "pkg" / "late.py").write_text("LATE = {1, 2, 3}\n")
        shipped = _pyc(site / "pkg" / "m2.py")
        shipped.write_bytes(b"not byte-code")
        record = compiler.finish({str(shipped)})
    finally:
        compiler.close()
    reference = bytecode.compile_site(
        Path(sys.executable), ref_site, RECORDED_AS, 2, os.environ, _runner
    )
    assert _pycs(site) == _pycs(ref_site)
    assert record.model_dump(exclude={"seconds"}) == reference.model_dump(exclude={"seconds"})
    assert record.failed == 1 and record.failed_examples == ["pkg/py2_only.py"]
    assert record.pyc_files == 16  # pkg (__init__, m0-m11, late), pkg.sub (2); py2_only none


def test_an_early_pyc_under_a_folder_compileall_does_not_enter_is_removed(tmp_path: Path) -> None:
    site = _tree(tmp_path / "env")
    compiler = _compiler(site, jobs=1)
    try:
        time.sleep(2 * MARGIN_NS / 1e9)
        # the reader reached it through the link (a RECORD row under a linked folder)
        source = site / "linked" / "mod.py"
        compiler.offer(str(source.relative_to(tmp_path / "env")), _early(source))
        compiler._drain()
        assert _pyc(source).exists()
        compiler.finish(set())
    finally:
        compiler.close()
    assert str(source) not in compileall_sources(site)
    assert not _pyc(source).exists()
    assert _pyc(site / "pkg" / "m0.py").exists()


def test_compileall_sources_is_compileall_s_walk(tmp_path: Path) -> None:
    site = _tree(tmp_path / "env")
    reference = bytecode.compile_site(
        Path(sys.executable), site, RECORDED_AS, 1, os.environ, _runner
    )
    sources = compileall_sources(site)
    assert len(sources) == reference.pyc_files + reference.failed
    assert all(s.startswith(f"{site}/") and s.endswith(".py") for s in sources)


def test_a_worker_that_dies_is_an_environment_problem(tmp_path: Path) -> None:
    site = _tree(tmp_path / "env")
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'Traceback: boom'\nexit 1\n")
    broken.chmod(0o755)
    compiler = EarlyBytecode(broken, site, RECORDED_AS, 2, os.environ, lambda _l: None)
    try:
        with pytest.raises(EnvironmentProblem, match=r"byte-code failed \(exit 1\)") as info:
            compiler.finish(set())
        assert "Traceback: boom" in info.value.details
    finally:
        compiler.close()
