"""Byte-code at build time: every `.py` of the env's site-packages compiled by the env's own
interpreter, so no process of the env (an SGLang server and each scheduler it spawns) compiles
modules on its first import (benchmarks/kernels_ahead/).

How the `.pyc` files are made, and why:
- PEP 552 checked-hash: the interpreter compares each `.pyc`'s source hash with its `.py` at
  every import, so a `.py` edited after the build never runs stale byte-code, and the bytes do
  not depend on file times (uv's cache keeps old mtimes). Timestamp `.pyc` would trust an
  mtime/size match; unchecked-hash ones would ignore an edited source altogether.
- The file name recorded in each is its path relative to site-packages (`torch/__init__.py`):
  an import replaces it with the source's real path (importlib's `_fix_co_filename`), so
  tracebacks name the env's files, and the bytes depend on neither the env's folder nor the
  `.partial` one it is built in. So a `.pyc` made once serves every later build of the same
  source with the same interpreter: builder.venv.pyc_store keeps them, and only sources it
  has not seen are compiled.
- They stay out of the tree hash (stackgate.envtree leaves every `__pycache__` out): imports
  write more of them at run time (modules this step skipped, other optimization levels), and
  what runs is pinned by the hashed `.py` the interpreter checks each `.pyc` against.
- PYTHONHASHSEED=0 and no other PYTHON* variable: set and frozenset constants are marshalled in
  hash order, PYTHONPYCACHEPREFIX would put the files outside the env and PYTHONOPTIMIZE
  would write `.opt-1.pyc` names no plain import reads.
- As many workers as the build's job plan allows (CPUs and memory, never swap), under the same
  watchdog as every other build step.

The sources are the files compileall would compile: every `*.py` under site-packages, through
folders that are not links, `__pycache__` left out. A `.py` the interpreter cannot compile
(test data, templates, Python-2 files some wheels ship) cannot be imported either: it is counted
and named in the record, not a build failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.venv.pyc_store import PycStore
from stackgate.build_record import BytecodeRecord, PycMode
from stackgate.envtree.digests import Key, key_of
from stackgate.errors import EnvironmentProblem

MODE: PycMode = "checked-hash"
_ERROR_PREFIX = "*** Error compiling "
_EXAMPLES = 5
_PROBE = (
    "import importlib.util, sys\n"
    "print(sys.implementation.cache_tag)\n"
    "print(importlib.util.MAGIC_NUMBER.hex(), sys.version.replace('\\n', ' '))\n"
)

# Runs argv with env, each output line to the callback; returns (exit code, the output's tail).
Runner = Callable[[Sequence[str], Mapping[str, str], Callable[[str], None]], tuple[int, list[str]]]


def compile_env(base: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: base without any PYTHON* variable, with a fixed hash seed."""
    env = {k: v for k, v in base.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    return env


def failed_path(line: str, site: Path) -> str | None:
    """The file a compile error line names, relative to site; None for any other line."""
    if not line.startswith(_ERROR_PREFIX):
        return None
    quoted = line[len(_ERROR_PREFIX) :].removesuffix("...")
    name = quoted[1:-1] if len(quoted) >= 2 and quoted[0] in "'\"" else quoted
    prefix = str(site) + os.sep
    return name.removeprefix(prefix)


def sources(site: Path, caches: set[str] | None = None) -> Iterator[str]:
    """Every `.py` compileall compiles under site, relative to it; the `__pycache__` folders
    passed on the way are added to caches."""
    folders = [site]
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name == "__pycache__":
                    if caches is not None and entry.is_dir(follow_symlinks=False):
                        caches.add(entry.path)
                    continue
                if not entry.is_dir():
                    if entry.name.endswith(".py") and entry.is_file():
                        yield os.path.relpath(entry.path, site)
                elif not entry.is_symlink():
                    folders.append(Path(entry.path))


def pyc_path(site: Path, source: str, tag: str) -> Path:
    """Where an import looks for source's `.pyc` (importlib.util.cache_from_source)."""
    head, name = os.path.split(source)
    return site / head / "__pycache__" / f"{name[:-3]}.{tag}.pyc"


def pyc_totals(caches: set[str]) -> tuple[int, int]:
    """(files, bytes) of every `.pyc` in the `__pycache__` folders caches names."""
    files = total = 0
    for folder in caches:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.endswith(".pyc") and not entry.is_dir():
                        files += 1
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return files, total


def _probe(python: Path, env: Mapping[str, str], run: Runner) -> tuple[str, str]:
    """(the interpreter's cache tag, its byte-code identity: magic, version and mode)."""
    said: list[str] = []
    code, tail = run([str(python), "-c", _PROBE], env, said.append)
    if code != 0 or len(said) < 2 or said[0] == "None":
        raise EnvironmentProblem(
            f"the env's interpreter {python} cannot say where its byte-code goes (exit {code})",
            details=tail[-8:],
        )
    return said[0], f"{said[1]} {MODE}"


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""  # compiling it fails too, and names it


def _compile(
    python: Path,
    site: Path,
    todo: Sequence[str],
    tag: str,
    jobs: int,
    env: Mapping[str, str],
    run: Runner,
) -> list[str]:
    """Compile todo with the env's interpreter (builder/venv/pyc_worker.py); the sources that
    did not compile, relative to site."""
    failed: list[str] = []

    def seen(line: str) -> None:
        path = failed_path(line, site)
        if path is not None:
            failed.append(path)

    items = [[str(site / s), str(pyc_path(site, s, tag)), s] for s in todo]
    worker = Path(__file__).with_name("pyc_worker.py").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="stackgate-pyc-") as scratch:
        job = Path(scratch) / "job.json"
        job.write_text(json.dumps({"jobs": jobs, "items": items}), encoding="utf-8")
        code, tail = run([str(python), "-c", worker, str(job)], env, seen)
    # exit 1 when a source did not compile; anything else (or 1 without an error line: an
    # exception, a killed worker) is the step failing
    if code != 0 and not (code == 1 and failed):
        raise EnvironmentProblem(
            f"compiling the env's byte-code failed (exit {code})", details=tail[-8:]
        )
    return failed


@dataclass(frozen=True)
class Prepared:
    """What the step needs before it looks at a source: the interpreter's cache tag and
    byte-code identity, its child environment and its store (None: every source is compiled).
    Made before the install, so `.pyc` can be put in place while uv still writes
    (builder.venv.pyc_early)."""

    python: Path
    tag: str
    interpreter: str
    env: dict[str, str]
    store: PycStore | None


def prepare(
    python: Path, base_env: Mapping[str, str], run: Runner, store_base: Path | None
) -> Prepared:
    env = compile_env(base_env)
    tag, interpreter = _probe(python, env, run)
    store = PycStore.open(store_base, interpreter) if store_base is not None else None
    return Prepared(python, tag, interpreter, env, store)


# source (relative to site) -> (the source sha256 its `.pyc` was chosen for, the `.pyc`'s lstat
# identity right after it was put in place)
Placed = Mapping[str, tuple[str, Key]]


def compile_site(
    ready: Prepared,
    site: Path,
    jobs: int,
    run: Runner,
    *,
    placed: Placed | None = None,
    known: Callable[[str], str | None] | None = None,
) -> BytecodeRecord:
    """Compile site's sources with ready's interpreter (the env's: the `.pyc` magic is its
    version's), taking the `.pyc` of sources seen before from its store;
    EnvironmentProblem when the compile itself fails, not a source it cannot read.

    placed: `.pyc` put in place during the install; one counts as done only while its source's
    sha256 now (known(source), the early reader's digest where the file is unchanged since, else
    read here) is the one it was chosen for and it is still the file put there. Anything else
    is put or compiled as if never placed; a placement of a source this step does not compile
    goes."""
    started = time.monotonic()
    tag, store, early = ready.tag, ready.store, placed or {}
    folders: set[Path] = set()
    reused = 0
    todo: list[tuple[str, str]] = []
    seen: set[str] = set()
    caches: set[str] = set()  # every `__pycache__` folder: the record counts their `.pyc`
    for source in sources(site, caches):
        seen.add(source)
        digest = (known(source) if known is not None else None) or _sha256(site / source)
        target = pyc_path(site, source, tag)
        if _still_placed(early.get(source), digest, target):
            reused += 1
            continue
        if store is not None and digest:
            if target.parent not in folders:
                target.parent.mkdir(exist_ok=True)
                folders.add(target.parent)
            if store.put(digest, source, target):
                reused += 1
                continue
        todo.append((source, digest))
    for source in early.keys() - seen:
        if _still_placed(early[source], early[source][0], pyc_path(site, source, tag)):
            pyc_path(site, source, tag).unlink()
    todo_sources = [s for s, _ in todo]
    failed = _compile(ready.python, site, todo_sources, tag, jobs, ready.env, run) if todo else []
    if store is not None:
        skip = set(failed)
        for source, digest in todo:
            if digest and source not in skip:
                store.keep(digest, source, pyc_path(site, source, tag))
    caches.update(str(pyc_path(site, s, tag).parent) for s, _ in todo)
    caches.update(str(f) for f in folders)
    files, size = pyc_totals(caches)
    return BytecodeRecord(
        mode=MODE,
        jobs=jobs,
        pyc_files=files,
        pyc_bytes=size,
        reused=reused,
        failed=len(failed),
        failed_examples=sorted(failed)[:_EXAMPLES],
        seconds=round(time.monotonic() - started, 3),
    )


def _still_placed(entry: tuple[str, Key] | None, digest: str, target: Path) -> bool:
    if entry is None or not digest or entry[0] != digest:
        return False
    try:
        return key_of(target.lstat()) == entry[1]
    except OSError:
        return False
