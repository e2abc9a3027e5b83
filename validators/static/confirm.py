"""Confirming loads: load what a static finding is about, for real, in a child process.

The child is the env's own interpreter, isolated (`-I`), with a timeout, doing what the
package's users do: `import torch` first when the env has it, then the package's top-level
modules (their own preloading), then each module in question: an extension module through
Python's extension loader (PyInit_, op registration), any other object with dlopen(RTLD_NOW)
through ctypes, as torch.ops.load_library does. Without the NVIDIA driver, the child's
LD_LIBRARY_PATH starts with driver_stub.py's stubs. A step that kills the child is recorded as
a crash and the child restarted after it, so one crash costs one step. No GPU is needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from stackgate import proc

# global: dlopen RTLD_GLOBAL (a module by name when no path), as cuda-core does with torch._C
StepKind = Literal["import", "extension", "library", "global"]
# stub-crash: crashed under the stub driver, and no real driver userland could confirm it
Outcome = Literal["ok", "error", "crash", "timeout", "stub-crash"]

_CHILD = r"""
import ctypes, importlib, importlib.machinery, importlib.util, json, os, select, site, sys
site.addsitedir(sys.argv[2])  # the env's site-packages (already there in a real venv)
steps = json.loads(sys.argv[1])
def say(**kw):
    sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
def run(step):
    kind, name, path = step["kind"], step["name"], step["path"]
    if kind == "import":
        importlib.import_module(name)
    elif kind == "extension":
        if name in sys.modules:
            return
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        loader.exec_module(importlib.util.module_from_spec(spec))
    elif kind == "global":
        ctypes.CDLL(path or importlib.import_module(name).__file__, mode=ctypes.RTLD_GLOBAL)
    else:
        ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
def go(first):
    for i, step in enumerate(steps[first:], first):
        say(start=i)
        try:
            run(step)
            say(done=i, ok=True)
        except BaseException as exc:  # every failure is the evidence we came for
            say(done=i, ok=False, error=(type(exc).__name__ + ": " + str(exc))[:800])
go(0)
if sys.argv[3:4] == ["--more"]:  # started early (Prewarmed): the rest of the steps on stdin
    for name in json.loads(sys.argv[4]) if sys.argv[4:] else []:  # Prewarmed.warm
        if select.select([sys.stdin], [], [], 0)[0]:
            break  # the steps are here: no import they may not need
        say(warm=name)
        try:
            importlib.import_module(name)
            say(warmed=name)
        except BaseException:  # no "warmed" line: the parent does not use this child
            pass
    start = len(steps)
    steps += json.loads(sys.stdin.readline() or "[]")
    go(start)
# every result is written: skip the interpreter's teardown (slow after torch and torchao;
# a crash in it was never a finding: run_steps ignores how a child ends after its last step)
sys.stdout.flush()
os._exit(0)
"""


@dataclass(frozen=True)
class Step:
    kind: StepKind
    name: str  # module name (import, extension) or file name (library)
    path: str = ""


@dataclass(frozen=True)
class StepResult:
    step: Step
    outcome: Outcome
    error: str = ""

    @property
    def undefined_symbol(self) -> str | None:
        marker = "undefined symbol: "
        if marker in self.error:
            return self.error.split(marker, 1)[1].split()[0].rstrip(",")
        return None


@dataclass
class LoadRun:
    results: list[StepResult] = field(default_factory=list)
    seconds: float = 0.0
    children: int = 0
    prewarmed: bool = False  # the first child was started early (Prewarmed)


def _signal_name(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def _child_env(library_path: Path | Sequence[Path] | None) -> dict[str, str]:
    env = {k: v for k, v in proc.child_env().items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    if isinstance(library_path, Path):
        library_path = [library_path]
    if library_path:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(str(p) for p in library_path)
    env["PYTHONWARNINGS"] = "ignore"
    return env


class Prewarmed:
    """The first child of a confirming run, started before the steps are known: it runs the steps
    every run starts with (`import torch`) while the parent still reads the env, then waits for the
    rest on its stdin. run_steps uses it only when its python, site-packages, LD_LIBRARY_PATH and
    first steps are exactly those of the run asked for (it is the same script and environment as a
    child run_steps starts itself); otherwise `discard` kills it.

    `warm`: modules it imports while it waits, because the coming steps usually import them
    (torch._dynamo: most of `import torchao`, vLLM and SGLang too). A successful import is what
    later steps get; one that failed or killed the child makes run_steps redo the run in a fresh
    child, so results are always those of a run without it. It is not begun once the steps have
    arrived.
    """

    def __init__(
        self,
        python: Path,
        steps: Sequence[Step],
        *,
        site_packages: Path,
        library_path: Path | None,
        warm: Sequence[str] = (),
    ) -> None:
        self.python = python
        self.steps = list(steps)
        self.site_packages = site_packages
        self.library_path = library_path
        self.warm = list(warm)
        payload = json.dumps([s.__dict__ for s in self.steps])
        argv = [str(python), "-I", "-c", _CHILD, payload, str(site_packages), "--more"]
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [*argv, json.dumps(self.warm)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_env(library_path),
        )

    def serves(
        self,
        python: Path,
        steps: Sequence[Step],
        site_packages: Path,
        library_path: Path | Sequence[Path] | None,
    ) -> bool:
        lib = [library_path] if isinstance(library_path, Path) else list(library_path or [])
        mine = [self.library_path] if self.library_path is not None else []
        return (
            self._proc is not None
            and python == self.python
            and site_packages == self.site_packages
            and lib == mine
            and list(steps[: len(self.steps)]) == self.steps
            and len(steps) > len(self.steps)
        )

    def finish(self, rest: Sequence[Step], timeout: float) -> tuple[str, int | None, str]:
        """Send the remaining steps; (stdout, exit status or None on a timeout, stderr)."""
        proc, self._proc = self._proc, None
        assert proc is not None
        try:
            stdout, stderr = proc.communicate(
                json.dumps([s.__dict__ for s in rest]) + "\n", timeout=timeout
            )
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, _ = proc.communicate()
            return stdout, None, f"no answer within {timeout:.0f} s"
        return stdout, proc.returncode, stderr

    def warmed(self, stdout: str) -> bool:
        """Whether every `warm` import the child began succeeded (a "warm" line has its
        "warmed" line in `stdout`; the child begins none once the steps have arrived). A warm
        import that failed or killed the child leaves the child's state unlike a fresh one's:
        run_steps then does not use its results."""
        begun, done = set(), set()
        for line in stdout.splitlines():
            with contextlib.suppress(ValueError):
                msg = json.loads(line)
                if isinstance(msg, dict):
                    begun.update([msg["warm"]] if "warm" in msg else [])
                    done.update([msg["warmed"]] if "warmed" in msg else [])
        return begun <= done

    def discard(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.communicate()


def _run_child(
    python: Path, payload: str, site_packages: Path, env: dict[str, str], timeout: float
) -> tuple[str, int | None, str]:
    """One child over `payload`: (stdout, exit status or None on a timeout, stderr)."""
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", _CHILD, payload, str(site_packages)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        stdout = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        return stdout, None, f"no answer within {timeout:.0f} s"
    return proc.stdout, proc.returncode, proc.stderr


def run_steps(
    python: Path,
    steps: Sequence[Step],
    *,
    site_packages: Path,
    library_path: Path | Sequence[Path] | None,
    timeout: float = 300.0,
    first: Prewarmed | None = None,
) -> LoadRun:
    """Run `steps` in order in children of `python`; restart after a crash or a timeout.
    `library_path`: the child's LD_LIBRARY_PATH (folders in order), nothing else. `first`:
    a child started earlier with the first steps, used as the first child if it serves this
    run (Prewarmed.serves)."""
    env = _child_env(library_path)
    if first is not None and not first.serves(python, steps, site_packages, library_path):
        first = None
    out = LoadRun()
    started = time.perf_counter()
    pending = list(steps)
    recorded: set[int] = set()  # indexes into `steps` with a result

    def record(result: StepResult) -> None:
        index = steps.index(result.step)
        if index not in recorded:
            recorded.add(index)
            out.results.append(result)

    while pending and out.children <= len(steps) + 1:  # each child finishes >= 1 step
        out.children += 1
        stdout, rc, stderr = _one_child(first, pending, python, site_packages, env, timeout, out)
        first = None
        in_flight, finished = _progress(stdout, pending, record)
        finished_after = _after_exit(rc, stderr, pending, in_flight, finished, record)
        rest = pending[finished_after:] if finished_after is not None else []
        if not rest:
            break
        # a new child first redoes the imports that worked (torch, the packages' preloads)
        good = {r.step for r in out.results if r.outcome == "ok" and r.step.kind == "import"}
        pending = [s for s in steps if s in good and s not in rest] + rest
    out.seconds = time.perf_counter() - started
    return out


def _one_child(
    first: Prewarmed | None,
    pending: list[Step],
    python: Path,
    site_packages: Path,
    env: dict[str, str],
    timeout: float,
    out: LoadRun,
) -> tuple[str, int | None, str]:
    """Run `pending` in one child: `first` when given (then pending are all the steps and it
    has run first.steps), unless its warm import failed; else a fresh child."""
    if first is not None:
        stdout, rc, stderr = first.finish(pending[len(first.steps) :], timeout)
        out.prewarmed = first.warmed(stdout)
        if out.prewarmed:
            return stdout, rc, stderr
    payload = json.dumps([s.__dict__ for s in pending])
    return _run_child(python, payload, site_packages, env, timeout)


def _progress(
    stdout: str, pending: list[Step], record: Callable[[StepResult], None]
) -> tuple[int | None, int]:
    """Record each step the child's output says it finished; (the step it had begun and not
    finished, or None; how many of `pending` it finished)."""
    in_flight: int | None = None
    finished = 0
    for line in stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "start" in msg:
            in_flight = msg["start"]
        elif "done" in msg:
            in_flight = None
            finished = msg["done"] + 1
            status: Outcome = "ok" if msg["ok"] else "error"
            record(StepResult(pending[msg["done"]], status, msg.get("error", "")))
    return in_flight, finished


def _after_exit(
    rc: int | None,
    stderr: str,
    pending: list[Step],
    in_flight: int | None,
    finished: int,
    record: Callable[[StepResult], None],
) -> int | None:
    """Record the step a dead child took down: the one in flight, else the next one when it
    died between steps. How many of `pending` are settled; None when the run is over."""
    why: Outcome = "timeout" if rc is None else "crash"
    if rc == 0 or in_flight is None:
        if in_flight is None and finished < len(pending) and rc != 0:
            record(StepResult(pending[finished], why, f"child died: {stderr[-300:]}"))
            return finished + 1
        return None
    detail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    record(
        StepResult(
            pending[in_flight],
            why,
            (_signal_name(rc) if rc is not None else stderr)
            + (f" ({detail[0][:200]})" if detail else ""),
        )
    )
    return in_flight + 1
