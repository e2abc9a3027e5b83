"""Byte-code compiled at build time (builder.venv.bytecode), on real builds of the local stack
and real compileall runs: every module has a checked-hash `.pyc` recorded at the env's final
path, an edited source never runs its stale byte-code (even with its old size and mtime, which
a timestamp `.pyc` would trust), the `.pyc` leave the tree hash alone, the bytes do not depend
on the folder they were compiled in, and the step uses the build's job plan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from builder.venv import bytecode
from stackgate.errors import EnvironmentProblem
from tests.builder.conftest import LocalStack

# PEP 552 flags word: bit 0 hash-based, bit 1 check_source
CHECKED_HASH = 0b11


def _site(env: Path) -> Path:
    return next(env.glob("lib/python3.*/site-packages"))


def _build(stack: LocalStack, env: dict[str, str] | None = None) -> dict[str, object]:
    assert stack.lock().returncode == 0
    done = stack.build("--json", "--topology", "pcie", env=env)
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def _verify(stack: LocalStack) -> subprocess.CompletedProcess[str]:
    return stack.cli("verify", stack.manifest, "--venv-root", stack.venvs, "--json", timeout=60)


def _run_env_python(env: Path, code: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [env / "bin" / "python", "-c", code],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def test_build_compiles_checked_hash_bytecode_at_the_final_path(local_stack: LocalStack) -> None:
    # the user's own PYTHONPYCACHEPREFIX / PYTHONOPTIMIZE must not move or rename the files
    out = _build(
        local_stack,
        env={"PYTHONPYCACHEPREFIX": str(local_stack.root / "elsewhere"), "PYTHONOPTIMIZE": "1"},
    )
    env = Path(str(out["env"]))
    record = out["record"]
    assert isinstance(record, dict)
    code = record["bytecode"]
    site = _site(env)
    sources = sorted(p for p in site.rglob("*.py") if "__pycache__" not in p.parts)
    assert sources, "the local stack installs modules"
    assert code["mode"] == "checked-hash"
    assert code["failed"] == 0 and code["failed_examples"] == []
    assert code["jobs"] == record["job_plan"]["jobs"]  # the build's job plan, reused
    pycs = sorted(site.rglob("__pycache__/*.pyc"))
    assert code["pyc_files"] == len(pycs) >= len(sources)
    assert code["pyc_bytes"] == sum(p.stat().st_size for p in pycs)
    assert not (local_stack.root / "elsewhere").exists()
    assert not list(site.rglob("*.opt-1.pyc"))
    assert "bytecode" in record["timings_s"]

    # header and recorded path, read by the env's own interpreter
    torch_init = site / "torch" / "__init__.py"
    probe = (
        "import importlib.util, marshal, json, sys\n"
        f"src = {str(torch_init)!r}\n"
        "data = open(importlib.util.cache_from_source(src), 'rb').read()\n"
        "print(json.dumps([int.from_bytes(data[4:8], 'little'), data[8:16].hex(),\n"
        "  importlib.util.source_hash(open(src, 'rb').read()).hex(),\n"
        "  marshal.loads(data[16:]).co_filename]))\n"
    )
    flags, stored, actual, filename = json.loads(_run_env_python(env, probe))
    assert flags == CHECKED_HASH
    assert stored == actual
    assert filename == str(env / torch_init.relative_to(env))
    assert ".partial" not in filename


def test_an_edited_source_never_runs_its_stale_bytecode(local_stack: LocalStack) -> None:
    env = Path(str(_build(local_stack)["env"]))
    target = _site(env) / "torch" / "__init__.py"
    before = target.stat()
    assert target.read_text() == "CUDA = '13.0'\n"
    # same size, same mtime: a timestamp .pyc would be taken as current and say 13.0
    tmp = target.with_name("__init__.py.new")
    tmp.write_text("CUDA = '99.9'\n")
    tmp.replace(target)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    assert _run_env_python(env, "import torch; print(torch.CUDA)") == "99.9"


def test_bytecode_leaves_the_tree_hash_alone(local_stack: LocalStack) -> None:
    out = _build(local_stack)
    env = Path(str(out["env"]))
    record = out["record"]
    assert isinstance(record, dict)
    recorded = record["tree"]["sha256"]
    assert record["bytecode"]["pyc_files"] > 0
    done = _verify(local_stack)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["actual"] == recorded
    # without any byte-code (as an env built before the step had), and after imports wrote
    # timestamp ones of their own: the same hash
    for cache in list(_site(env).rglob("__pycache__")):
        shutil.rmtree(cache)
    assert json.loads(_verify(local_stack).stdout)["actual"] == recorded
    _run_env_python(env, "import torch, sglang")
    assert list(_site(env).rglob("__pycache__/*.pyc"))
    done = _verify(local_stack)
    assert done.returncode == 0 and json.loads(done.stdout)["actual"] == recorded


def _subprocess_runner(
    argv: Sequence[str], env: Mapping[str, str], on_line: Callable[[str], None]
) -> tuple[int, list[str]]:
    done = subprocess.run(list(argv), env=dict(env), capture_output=True, text=True, timeout=300)
    lines = (done.stdout + done.stderr).splitlines()
    for line in lines:
        on_line(line)
    return done.returncode, lines[-40:]


def _source_tree(root: Path) -> Path:
    """A small real tree: set and frozenset constants (marshalled in hash order), nested
    packages, a module with a docstring and a lambda."""
    site = root / "site-packages"
    (site / "pkg" / "sub").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text('"""Doc."""\nNAMES = {"alpha", "beta", "gamma"}\n')
    (site / "pkg" / "sub" / "__init__.py").write_text("")
    (site / "pkg" / "sub" / "mod.py").write_text(
        "def f(x):\n    return x in {'a', 'b', 'c', 'd', 'e', 'f'} or (lambda y: y)(x)\n"
    )
    for n in range(20):
        (site / "pkg" / f"m{n}.py").write_text(f"VALUE = {n}\nKEYS = {{'k{n}', 'j{n}', 'x'}}\n")
    return site


def test_pyc_bytes_do_not_depend_on_the_build_folder_or_hash_seed(tmp_path: Path) -> None:
    recorded_as = Path("/opt/envs/demo/lib/site-packages")
    results = []
    for name, seed in (("a", "1"), ("b", "12345")):
        site = _source_tree(tmp_path / name)
        done = bytecode.compile_site(
            Path(sys.executable),
            site,
            recorded_as,
            2,
            {**os.environ, "PYTHONHASHSEED": seed},
            _subprocess_runner,
        )
        assert done.failed == 0 and done.pyc_files == 23
        results.append({p.relative_to(site): p.read_bytes() for p in site.rglob("*.pyc")})
    assert results[0] == results[1]


def test_a_source_that_does_not_compile_is_named_not_fatal(tmp_path: Path) -> None:
    site = _source_tree(tmp_path)
    (site / "pkg" / "py2_only.py").write_text('print "hello"\n')
    (site / "pkg" / "sub" / "tab.py").write_text("if True:\n\tx = 1\n        y = 2\n")
    done = bytecode.compile_site(
        Path(sys.executable), site, site, 1, os.environ, _subprocess_runner
    )
    assert done.failed == 2
    assert done.failed_examples == ["pkg/py2_only.py", "pkg/sub/tab.py"]
    assert done.pyc_files == 23


def test_compileall_itself_failing_is_an_environment_problem(tmp_path: Path) -> None:
    site = _source_tree(tmp_path)
    missing = tmp_path / "no-python"
    missing.write_text("#!/bin/sh\necho 'Traceback: boom' >&2\nexit 1\n")
    missing.chmod(0o755)
    with pytest.raises(EnvironmentProblem, match=r"byte-code failed \(exit 1\)") as info:
        bytecode.compile_site(missing, site, site, 1, os.environ, _subprocess_runner)
    assert "Traceback: boom" in info.value.details
