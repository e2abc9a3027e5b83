"""Byte-code compiled at build time (builder.venv.bytecode, builder.venv.pyc_store), on real
builds of the local stack and real compiles: every module has a checked-hash `.pyc` whose
recorded name an import turns into the env's real path, an edited source never runs its stale
byte-code (even with its old size and mtime, which a timestamp `.pyc` would trust), the `.pyc`
leave the tree hash alone, the bytes are compileall's and do not depend on the folder they were
compiled in, a second site takes them from the store (a damaged entry is a miss, a store others
can write is not used), and the step uses the build's job plan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from builder.venv import bytecode
from stackgate.build_record import BytecodeRecord
from stackgate.errors import EnvironmentProblem
from tests.builder.conftest import LocalStack
from tests.helpers.step_runner import run_lines

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


def test_build_compiles_checked_hash_bytecode_named_by_the_env_path(
    local_stack: LocalStack,
) -> None:
    # the user's own PYTHONPYCACHEPREFIX / PYTHONOPTIMIZE must not move or rename the files
    store = local_stack.root / "cache"
    out = _build(
        local_stack,
        env={
            "PYTHONPYCACHEPREFIX": str(local_stack.root / "elsewhere"),
            "PYTHONOPTIMIZE": "1",
            "STACKGATE_CACHE": str(store),
        },
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
    assert code["reused"] == 0  # an empty store: every source compiled, then kept
    assert len(list((store / "pyc").rglob("*.pyc"))) == len(sources)
    pycs = sorted(site.rglob("__pycache__/*.pyc"))
    assert code["pyc_files"] == len(pycs) >= len(sources)
    assert code["pyc_bytes"] == sum(p.stat().st_size for p in pycs)
    assert not (local_stack.root / "elsewhere").exists()
    assert not list(site.rglob("*.opt-1.pyc"))
    assert "bytecode" in record["timings_s"]

    # header, recorded name and the name an import gives, read by the env's own interpreter
    torch_init = site / "torch" / "__init__.py"
    probe = (
        "import importlib.util, marshal, json, sys, torch\n"
        f"src = {str(torch_init)!r}\n"
        "data = open(importlib.util.cache_from_source(src), 'rb').read()\n"
        "print(json.dumps([int.from_bytes(data[4:8], 'little'), data[8:16].hex(),\n"
        "  importlib.util.source_hash(open(src, 'rb').read()).hex(),\n"
        "  marshal.loads(data[16:]).co_filename,\n"
        "  torch.__loader__.get_code('torch').co_filename]))\n"
    )
    flags, stored, actual, recorded, imported = json.loads(_run_env_python(env, probe))
    assert flags == CHECKED_HASH
    assert stored == actual
    assert recorded == "torch/__init__.py"
    assert imported == str(torch_init)
    assert ".partial" not in imported


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


def _compile(
    site: Path, store: Path | None, jobs: int = 2, python: Path = Path(sys.executable)
) -> BytecodeRecord:
    ready = bytecode.prepare(python, os.environ, run_lines, store)
    return bytecode.compile_site(ready, site, jobs, run_lines)


def _pycs(site: Path) -> dict[Path, bytes]:
    return {p.relative_to(site): p.read_bytes() for p in site.rglob("*.pyc")}


def test_pyc_bytes_do_not_depend_on_the_build_folder_or_hash_seed(tmp_path: Path) -> None:
    results = []
    for name, seed in (("a", "1"), ("b", "12345")):
        site = _source_tree(tmp_path / name)
        environ = {**os.environ, "PYTHONHASHSEED": seed}
        ready = bytecode.prepare(Path(sys.executable), environ, run_lines, None)
        done = bytecode.compile_site(ready, site, 2, run_lines)
        assert done.failed == 0 and done.pyc_files == 23 and done.reused == 0
        results.append(_pycs(site))
    assert results[0] == results[1]


def test_the_bytes_are_compileall_s_with_the_site_stripped(tmp_path: Path) -> None:
    ours = _source_tree(tmp_path / "ours")
    (ours / "pkg" / "linked.py").symlink_to(ours / "pkg" / "m1.py")
    (ours / "pkg" / "linked_dir").symlink_to(ours / "pkg" / "sub")  # not walked, as compileall
    theirs = tmp_path / "theirs" / "site-packages"
    shutil.copytree(ours, theirs, symlinks=True)
    assert _compile(ours, None).pyc_files == 24
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode",
            "checked-hash",
            "-s",
            str(theirs),
            str(theirs),
        ],
        env=bytecode.compile_env(os.environ),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == ""
    assert _pycs(ours) == _pycs(theirs)


def _import(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {**bytecode.compile_env(os.environ), "PYTHONPATH": str(site)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_a_second_site_takes_its_pyc_from_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _source_tree(tmp_path / "a")
    assert _compile(first, store).reused == 0
    second = _source_tree(tmp_path / "b")
    shipped = bytecode.pyc_path(second, "pkg/m1.py", sys.implementation.cache_tag)
    shipped.parent.mkdir()
    shipped.write_bytes(b"a .pyc the wheel shipped")  # replaced, as compileall would
    done = _compile(second, store)
    assert done.reused == done.pyc_files == 23
    assert _pycs(second) == _pycs(first)
    # linked, not copied: the store and the env share one file per module
    linked = bytecode.pyc_path(second, "pkg/sub/mod.py", sys.implementation.cache_tag)
    assert linked.stat().st_nlink == 2
    # an import names the second site's files, though the bytes were made in the first
    shown = _import(second, "import pkg.sub.mod as m; print(m.f.__code__.co_filename); m.f([])")
    assert shown.stdout.splitlines()[0] == str(second / "pkg" / "sub" / "mod.py")
    assert f'File "{second / "pkg" / "sub" / "mod.py"}", line 2' in shown.stderr
    # an edited source is compiled, the rest still come from the store
    third = _source_tree(tmp_path / "c")
    (third / "pkg" / "m3.py").write_text("VALUE = 'edited'\n")
    done = _compile(third, store)
    assert (done.reused, done.pyc_files) == (22, 23)
    assert _import(third, "import pkg.m3; print(pkg.m3.VALUE)").stdout.strip() == "edited"


def test_a_module_whose_name_is_not_utf8_is_compiled_and_stored(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for name in ("a", "b"):
        site = _source_tree(tmp_path / name)
        (site / "pkg" / os.fsdecode(b"caf\xe9.py")).write_text("VALUE = 1\n")
        (site / "pkg" / os.fsdecode(b"bad\xff.py")).write_text("print 'py2'\n")
        done = _compile(site, store, jobs=1)
        assert (done.pyc_files, done.failed) == (24, 1)
        # named as compileall names it: the undecodable byte escaped, printable in the record
        assert done.failed_examples == ["pkg/bad\\udcff.py"]
    assert done.reused == 24


def test_a_store_on_another_file_system_is_copied(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    assert shm.is_dir() and os.stat(shm).st_dev != os.stat(tmp_path).st_dev
    with tempfile.TemporaryDirectory(dir=shm) as elsewhere:
        store = Path(elsewhere) / "store"
        _compile(_source_tree(tmp_path / "a"), store)
        site = _source_tree(tmp_path / "b")
        assert _compile(site, store).reused == 23
        assert {p.stat().st_nlink for p in site.rglob("*.pyc")} == {1}
        assert _pycs(site) == _pycs(tmp_path / "a" / "site-packages")


def test_a_damaged_entry_is_a_miss_and_is_replaced(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _compile(_source_tree(tmp_path / "a"), store)
    entries = sorted(store.rglob("*.pyc"))
    assert len(entries) == 23
    entries[0].write_bytes(entries[0].read_bytes()[:-3])  # truncated
    entries[1].write_bytes(b"not a stored pyc")
    site = _source_tree(tmp_path / "b")
    done = _compile(site, store)
    assert (done.reused, done.pyc_files) == (21, 23)
    assert _pycs(site) == _pycs(tmp_path / "a" / "site-packages")
    # a linked .pyc written in place changes its entry: the next build does not take it
    linked = next(p for p in site.rglob("*.pyc") if p.stat().st_nlink == 2)
    with linked.open("r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    done = _compile(_source_tree(tmp_path / "c"), store)
    assert (done.reused, done.pyc_files) == (22, 23)
    assert _compile(_source_tree(tmp_path / "d"), store).reused == 23  # all made again


def test_a_store_others_can_write_is_not_used(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    store.chmod(0o777)
    assert _compile(_source_tree(tmp_path / "a"), store).reused == 0
    assert not list(store.iterdir())
    store.chmod(0o700)
    _compile(_source_tree(tmp_path / "b"), store)
    assert _compile(_source_tree(tmp_path / "c"), store).reused == 23


def test_a_source_that_does_not_compile_is_named_not_fatal(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for name in ("a", "b"):
        site = _source_tree(tmp_path / name)
        (site / "pkg" / "py2_only.py").write_text('print "hello"\n')
        (site / "pkg" / "sub" / "tab.py").write_text("if True:\n\tx = 1\n        y = 2\n")
        done = _compile(site, store, jobs=1)
        assert done.failed == 2
        assert done.failed_examples == ["pkg/py2_only.py", "pkg/sub/tab.py"]
        assert done.pyc_files == 23
    assert done.reused == 23  # the two that fail are not stored: named again


def _fake_python(tmp_path: Path, worker_exit: int) -> Path:
    """Answers the probe as CPython 3.12 would, then fails the compile with worker_exit."""
    fake = tmp_path / "fake-python"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$2" in *cache_tag*) echo cpython-312; echo cb0d0d0a 3.12.1; exit 0;; esac\n'
        f"echo 'Traceback: boom' >&2\nexit {worker_exit}\n"
    )
    fake.chmod(0o755)
    return fake


def test_the_compile_itself_failing_is_an_environment_problem(tmp_path: Path) -> None:
    site = _source_tree(tmp_path)
    for status in (1, 2):
        with pytest.raises(
            EnvironmentProblem, match=rf"byte-code failed \(exit {status}\)"
        ) as info:
            _compile(site, None, python=_fake_python(tmp_path, status))
        assert "Traceback: boom" in info.value.details


def test_an_interpreter_that_cannot_say_its_cache_tag_is_an_environment_problem(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "no-python"
    broken.write_text("#!/bin/sh\necho 'Traceback: boom' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(EnvironmentProblem, match=r"cannot say where its byte-code goes") as info:
        _compile(_source_tree(tmp_path), None, python=broken)
    assert "Traceback: boom" in info.value.details
