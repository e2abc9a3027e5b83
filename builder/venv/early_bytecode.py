"""Byte-code compiled while uv is still installing: each `.py` of site-packages is compiled as
soon as the early reader (stackgate.early_digests) has read it, by long-lived workers of the
env's own interpreter, instead of by one `python -m compileall` after the install.

Why: on cu128 the compile is ~70 CPU-s (23,798 files, 361 MB of source) and ran after
everything else (35.9 s of a 112 s build on 2 cores); during the install the cores are partly
idle while uv copies 10 GB.

The same bytes as `python -m compileall -q -s SITE -p FINAL --invalidation-mode checked-hash
SITE` (builder.venv.bytecode), by construction: each worker calls `compileall.compile_file` with
the arguments compileall's own `compile_dir` passes it, on the same path string (SITE joined
with the file's path under it), in the same environment (bytecode.compile_env: PYTHONHASHSEED=0,
no other PYTHON* variable). The worker runs with `-S` (no site: no `.pth` of the lock runs
before the origin check has passed, and none is needed to compile) and drops the working
folder from sys.path before importing anything.

A `.pyc` written early is kept only when both hold at the bytecode step:
- its source is provably the bytes that were compiled: the early reader's rule
  (stackgate.early_digests.Early.valid_for: lstat identity unchanged since a read that began
  well after the last write; compiling began after that read, so any write since moved ctime);
- the `.pyc` is still the one the worker wrote (lstat identity) and no RECORD lists it (a wheel
  that ships its own `.pyc` has uv write it at any time during the install).
Every other source compileall would compile (found by the same walk) is compiled then, after
the install, clash step, profile and kernels, as before; a `.pyc` written early for a source the
walk does not reach (under a linked folder) is removed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.venv.bytecode import MODE, compile_env, pyc_totals
from stackgate.build_record import BytecodeRecord
from stackgate.digests import Key, key_of
from stackgate.early_digests import Early
from stackgate.errors import EnvironmentProblem

_MARK = "\x1estackgate-compiled "
_EXAMPLES = 5
_TAIL = 40

# Run by the env's interpreter: NUL-terminated paths in, one mark line per path out.
WORKER = r"""
import sys
del sys.path[0]
import compileall, importlib.util, os, py_compile
site, final, mode = sys.argv[1:4]
invalidation = py_compile.PycInvalidationMode[mode.replace("-", "_").upper()]
pending = b""
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    pending += chunk
    *names, pending = pending.split(b"\0")
    for name in names:
        path = os.fsdecode(name)
        ok = compileall.compile_file(
            path, ddir=None, force=False, rx=None, quiet=1, legacy=False, optimize=[-1],
            invalidation_mode=invalidation, stripdir=site, prependdir=final,
            limit_sl_dest=None, hardlink_dupes=False,
        )
        cfile = os.fsencode(importlib.util.cache_from_source(path)).hex()
        sys.stdout.write("%s%d %s\n" % (MARK, 1 if ok else 0, cfile))
        sys.stdout.flush()
""".replace("MARK", repr(_MARK))


@dataclass(frozen=True)
class Compiled:
    ok: bool
    source: Early | None  # the early read it was compiled after; None: compiled after the install
    pyc: str
    pyc_key: Key | None  # lstat identity of the .pyc right after the worker wrote it

    def kept(self, path: str, listed: Collection[str]) -> bool:
        """Still the byte-code of the source as it is now (module docstring)."""
        if self.source is None or self.pyc_key is None or self.pyc in listed:
            return False
        try:
            return self.source.valid_for(os.lstat(path)) and key_of(os.lstat(self.pyc)) == (
                self.pyc_key
            )
        except OSError:
            return False


def compileall_sources(site: Path) -> list[str]:
    """The files `python -m compileall SITE` compiles, as the paths it names them by: its walk
    (sorted, `__pycache__` skipped, linked folders not entered) and compile_file's filter (a
    name ending `.py` that is a file, links followed)."""
    out: list[str] = []

    def walk(folder: str) -> Iterator[str]:
        try:
            names = sorted(os.listdir(folder))  # noqa: PTH208 -- compileall's own calls
        except OSError:
            return
        for name in names:
            if name == "__pycache__":
                continue
            full = os.path.join(folder, name)  # noqa: PTH118 -- the same path strings
            if not os.path.isdir(full):  # noqa: PTH112
                yield full
            elif not os.path.islink(full):  # noqa: PTH114
                yield from walk(full)

    for path in walk(str(site)):
        if path.endswith(".py") and os.path.isfile(path):  # noqa: PTH113
            out.append(path)
    return out


class EarlyBytecode:
    """Workers that compile sources as they are offered; `finish()` at the bytecode step."""

    def __init__(
        self,
        python: Path,
        site: Path,
        recorded_as: Path,
        jobs: int,
        base_env: Mapping[str, str],
        on_line: Callable[[str], None],
    ) -> None:
        self.site = str(site)
        self.env = site.parents[2]  # <env>/lib/pythonX.Y/site-packages
        self._prefix = self.site + os.sep
        self.jobs = max(1, jobs)
        self.results: dict[str, Compiled] = {}
        self._on_line = on_line
        self._queue: queue.Queue[tuple[str, Early | None] | None] = queue.Queue()
        self._offered: set[str] = set()
        self._offered_lock = threading.Lock()
        self._tail: deque[str] = deque(maxlen=_TAIL)
        self._failed: str | None = None
        self._python = python
        self._argv = [str(python), "-S", "-c", WORKER, self.site, str(recorded_as), MODE]
        self._env = compile_env(base_env)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._threads: list[threading.Thread] = []
        self._start()

    def _start(self) -> None:
        try:
            for n in range(self.jobs):
                proc = subprocess.Popen(
                    self._argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=self._env,
                )
                self._procs.append(proc)
                thread = threading.Thread(
                    target=self._serve, args=(proc,), name=f"bytecode-{n}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        except OSError as exc:
            self.close()
            raise EnvironmentProblem(
                f"could not start {self._python} to compile byte-code: {exc}"
            ) from exc

    def offer(self, rel: str, early: Early) -> None:
        """The early reader's callback: a source of site-packages it has just read (rel: its
        path under the env) is compiled."""
        path = f"{self.env}/{rel}"
        if not path.startswith(self._prefix) or not path.endswith(".py"):
            return
        if "/__pycache__/" in path[len(self._prefix) - 1 :]:
            return
        with self._offered_lock:
            if path in self._offered:
                return
            self._offered.add(path)
        self._queue.put((path, early))

    def _serve(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._failed is None:
                    self._compile(proc, *item)
            except OSError:  # the worker is gone (a closed pipe)
                self._died(proc)
            finally:
                self._queue.task_done()

    def _compile(self, proc: subprocess.Popen[bytes], path: str, early: Early | None) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(os.fsencode(path) + b"\0")
        proc.stdin.flush()
        while True:
            raw = proc.stdout.readline()
            if not raw:
                self._died(proc)
                return
            line = raw.decode("utf-8", "backslashreplace").rstrip("\n")
            if line.startswith(_MARK):
                ok, cfile = line[len(_MARK) :].split(" ", 1)
                pyc = os.fsdecode(bytes.fromhex(cfile))
                try:
                    pyc_key: Key | None = key_of(os.lstat(pyc))
                except OSError:
                    pyc_key = None
                self.results[path] = Compiled(ok == "1", early, pyc, pyc_key)
                return
            self._tail.append(line)
            self._on_line(line)

    def _died(self, proc: subprocess.Popen[bytes]) -> None:
        """A worker ended before its work did: the step fails with its exit code and output."""
        assert proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for raw in proc.stdout.read().splitlines():
                self._tail.append(raw.decode("utf-8", "backslashreplace"))
        code = proc.wait()
        self._failed = self._failed or f"compiling the env's byte-code failed (exit {code})"

    def finish(self, listed: Collection[str]) -> BytecodeRecord:
        """Compile what was not compiled early (or changed since), wait for every worker, and
        record the step as builder.venv.bytecode does; `listed`: every path a RECORD lists
        (seconds: this step's own, not the compiling done during the install)."""
        started = time.monotonic()
        sources = compileall_sources(Path(self.site))
        self._drain()  # the early ones first: their results decide what is compiled again
        early_done = dict(self.results)
        again = 0
        for path in sources:
            done = early_done.get(path)
            if done is None or not done.kept(path, listed):
                again += 1
                self._queue.put((path, None))
        self._drain()
        self._on_line(
            f"byte-code: {len(sources) - again} of {len(sources)} sources compiled during the "
            f"install ({len(early_done)} tried), {again} after it"
        )
        walked = set(sources)
        for path, done in early_done.items():
            if path not in walked and done.pyc_key is not None:
                with contextlib.suppress(OSError):
                    if key_of(os.lstat(done.pyc)) == done.pyc_key:
                        Path(done.pyc).unlink()
        failed = sorted(
            path.removeprefix(self._prefix)
            for path in sources
            if path in self.results and not self.results[path].ok
        )
        files, size = pyc_totals(Path(self.site))
        return BytecodeRecord(
            mode=MODE,
            jobs=self.jobs,
            pyc_files=files,
            pyc_bytes=size,
            failed=len(failed),
            failed_examples=failed[:_EXAMPLES],
            seconds=round(time.monotonic() - started, 3),
        )

    def _drain(self) -> None:
        self._queue.join()
        if self._failed is not None:
            raise EnvironmentProblem(self._failed, details=list(self._tail)[-8:])

    def close(self) -> None:
        """Stop the workers (idempotent); what is queued is dropped."""
        self._failed = self._failed or "stopped"
        self._stop()

    def _stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for proc in self._procs:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for thread in self._threads:
            thread.join(timeout=5)
        for proc in self._procs:
            if proc.stdout is not None:
                proc.stdout.close()
        self._threads = []
        self._procs = []
